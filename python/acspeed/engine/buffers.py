"""Tensors the comm hook reuses across steps, so a warm step allocates nothing: a bucket's packed
copy (compressed, or zero-padded to the algorithm's divisor) and its shard.

Keyed by (bucket index, role). A tensor is replaced when its bucket's size, dtype or device changes
(DDP rebuilds its buckets after the first step) and dropped when the bucket no longer exists. New
tensors are zero-filled once: padding stays zero, because every rank pads with zeros and every
algorithm writes back sums of those zeros.

CUDA: a tensor is allocated, and replaced, on the lane's CUDA stream. Its uses on NCCL's CUDA
streams and on the callbacks' CUDA streams of `then()` all end before the next step's hook runs
(DDP's compute CUDA stream waits on each bucket's future in finalize_backward, and the lane's CUDA
stream waits on the compute CUDA stream before touching the tensor again), so the caching allocator
never hands its memory out early.
"""
from typing import Dict, Tuple

import torch


class Scratch:
    def __init__(self):
        self._tensors: Dict[Tuple[int, str], torch.Tensor] = {}

    def get(self, index: int, role: str, numel: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        tensor = self._tensors.get((index, role))
        if tensor is None or tensor.numel() != numel or tensor.dtype != dtype or tensor.device != device:
            tensor = torch.zeros(numel, dtype=dtype, device=device)
            self._tensors[(index, role)] = tensor
        return tensor

    def keep_only(self, buckets: int) -> None:
        """Drops the tensors of buckets >= `buckets` (the model has fewer buckets now)."""
        for key in [key for key in self._tensors if key[0] >= buckets]:
            del self._tensors[key]

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self._tensors.values())

    def clear(self) -> None:
        self._tensors.clear()
