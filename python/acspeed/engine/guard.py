"""The compression guard's pieces (the guard itself runs in state.py, at the step's last hook
call): a bucket whose compressed, reduced copy holds NaN/Inf is reduced again uncompressed. The
reduced copy is identical on every rank, so every rank reaches the same verdict."""
import dataclasses
from typing import Callable, Optional

import torch

from .issue import Job


def nonfinite(tensor: torch.Tensor) -> torch.Tensor:
    """A 0-d bool tensor on the tensor's device: does it hold a NaN or an Inf? One pass (aminmax
    propagates NaN; an Inf is the min or the max), many times cheaper than isfinite().all()."""
    low, high = torch.aminmax(tensor)
    return ~(torch.isfinite(low) & torch.isfinite(high))


def can_overflow(compressed: torch.dtype, original: torch.dtype) -> bool:
    """Can a sum that `original` holds be too large for `compressed`? Only when `compressed`'s
    largest value is smaller by more than rounding at the edge of the range (bf16 against fp32: no;
    its largest value is within 0.4% of fp32's). Where it cannot, a non-finite compressed sum means
    a non-finite gradient, which re-sending uncompressed would not make finite: the guard would only
    cost a pass over every bucket."""
    return torch.finfo(compressed).max < torch.finfo(original).max / 2


@dataclasses.dataclass
class Guarded:
    """A compressed bucket whose verdict the step's last hook call settles."""
    job: Optional[Job]
    flat: torch.Tensor
    unpack: Callable[[], None]
    flag: Optional[torch.Tensor] = None   # set by the job's finish: NaN/Inf in the reduced copy
    ready: Optional[object] = None        # CUDA: event recorded after the flag, on the callback's CUDA stream
    reduced: Optional[torch.Tensor] = None  # CPU, deferred: the reduced copy the last hook call checks

    def hold(self, flag: torch.Tensor) -> bool:
        """Called by the job's finish with the reduced copy's NaN/Inf flag. True: the step's last hook
        call completes the bucket (CUDA: always, it reads every flag at once after `ready`, so there is
        no host sync here; CPU: when the flag is set, a plain read of host memory)."""
        self.flag = flag
        if self.flat.is_cuda:
            self.ready = torch.cuda.Event()
            self.ready.record()
            return True
        return bool(flag)

    def defer(self, reduced: torch.Tensor) -> bool:
        """Called by a cast's finish with the reduced copy; always True (the last hook call completes
        the bucket). CUDA: its flag now, as hold(). CPU: nothing now; the step's last hook call checks
        it (verdict()) on the hook's thread, which is idle then, waiting for the step's transfers,
        while the backend's thread that runs this finish goes straight on to the next collective:
        the check's pass over the bucket stays off the path of the transfers, as in torch's fp16 hook,
        which has no check."""
        if self.flat.is_cuda:
            return self.hold(nonfinite(reduced))
        self.reduced = reduced
        return True

    def verdict(self) -> bool:
        """CPU, once the job's finish ran: does the reduced copy hold NaN/Inf?"""
        return bool(nonfinite(self.reduced) if self.reduced is not None else self.flag)
