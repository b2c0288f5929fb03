"""The plain path, and the cast compressions (fp16, bf16): a bucket divided by the world size and
reduced by the algorithm's phases in its own dtype, or converted first, as torch's compress hooks
do (convert, then divide in the compressed type: at two ranks the parameters are bit for bit those
of `fp16_compress_hook` / `bf16_compress_hook`). Buffers are packed only where needed (a cast, or
padding for a sharded algorithm) and reused across steps (buffers.py), so a warm step allocates
nothing. A compressed bucket is checked for NaN/Inf (fallback.py) when the compressed type can overflow."""
from typing import TYPE_CHECKING, Optional, Sequence, Tuple

import torch

from .. import _runtime
from .fallback import FallbackEntry, can_overflow, fp16_of_fp32_on_cpu
from .issue import Job

if TYPE_CHECKING:
    from .._core import CommConfig
    from .lanes import Lane


def wire_dtype(config: "CommConfig") -> Optional[torch.dtype]:
    """The dtype a cast compression (fp16, bf16) sends buckets in, from the runtime's compression table
    (runtime/include/acspeed/comm_methods.h); None: the gradients' own (uncompressed, or a low-rank
    compression's factors, see powersgd.py)."""
    name = config.compression_info.cast_dtype
    return getattr(torch, name) if name else None


def pack(packed: torch.Tensor, flat: torch.Tensor, world_size: int) -> None:
    """packed = flat converted to packed's dtype, then divided by the world size in that dtype, as
    torch's compress hooks compute it (`flat.to(dtype).div_(world_size)`). An fp32 bucket into fp16 on
    the CPU is one C++ pass, bit for bit the same (`_core.pack_fp16`), where torch makes two."""
    if fp16_of_fp32_on_cpu(packed, flat):
        _runtime.core().pack_fp16(flat.data_ptr(), packed.data_ptr(), flat.numel(), world_size)
        return
    packed.copy_(flat)
    packed.div_(world_size)


class Cast:
    """The compressor of the wire forms as_is and cast (compressor.py), and the plain path of every
    hook state: `dtype` None sends buckets as they are."""

    state = None

    def __init__(self, dtype: Optional[torch.dtype]):
        self.wire_dtype = dtype

    @classmethod
    def create(cls, config: "CommConfig", algorithm, topology, params: Sequence[torch.nn.Parameter]) -> "Cast":
        return cls(wire_dtype(config))

    def roles(self, algorithm) -> Tuple[str, ...]:
        return tuple(algorithm.roles)

    def place(self, algorithm, phases: list) -> list:
        return phases

    def begin_step(self) -> bool:
        return self.wire_dtype is not None

    def job(self, hook, index: int, bucket, flat: torch.Tensor, lane: "Lane", result) -> Job:
        return self.plain_job(hook, index, flat, lane, result, compress=True)

    def end_step(self, compressed: bool) -> None:
        pass

    def plain_job(self, hook, index: int, flat: torch.Tensor, lane: "Lane", result, compress: bool) -> Job:
        """Divides and packs the bucket (in the issuer's context: on CUDA, the lane's CUDA stream) and plans
        its collectives, in the slots of the hook's compressor. The bucket itself is left untouched
        while its compressed copy is in flight, so the fallback can still reduce it uncompressed."""
        dtype = self.wire_dtype if compress else None
        if dtype is not None and flat.element_size() <= torch.finfo(dtype).bits // 8:
            dtype = None  # the bucket is no wider than the compressed type
        scratch, world_size = hook.scratch, hook.world_size
        divisor = hook.algorithm.divisor(hook.collectives, lane, dtype or flat.dtype)
        numel = flat.numel()
        padded = -(-numel // divisor) * divisor
        if dtype is not None:  # as torch's compress hooks: convert, then divide in the compressed type
            packed = scratch.get(index, "packed", padded, dtype, flat.device)
            pack(packed[:numel], flat, world_size)  # the padding stays zero
        elif padded != numel:
            packed = scratch.get(index, "padded", padded, flat.dtype, flat.device)
            torch.div(flat, world_size, out=packed[:numel])
        else:
            packed = flat.div_(world_size)

        def shard_for(shard_numel: int) -> torch.Tensor:
            return scratch.get(index, "shard", shard_numel, packed.dtype, flat.device)

        def unpack() -> None:
            if packed is not flat:
                flat.copy_(packed[:numel])

        phases = hook.compressor.place(hook.algorithm, hook.algorithm.phases(hook.collectives, lane, packed, shard_for))
        check = dtype is not None and hook.checking_nonfinite and can_overflow(dtype, flat.dtype)
        entry = FallbackEntry(job=None, flat=flat, unpack=unpack, cast=True) if check else None

        def finish() -> Optional[torch.Tensor]:
            if entry is None:
                unpack()
            elif entry.unpack_or_hold(packed[:numel]):
                return None
            return hook.completed(index, flat)

        return hook.tracked_job(Job(index=index, lane=lane, phases=phases, finish=finish, result=result,
                                    delay_s=hook.test_delays.get(lane.index, 0.0)), entry)
