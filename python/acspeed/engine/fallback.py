"""The non-finite fallback's pieces (the fallback itself runs in state.py, at the step's last hook
call): a bucket whose compressed, reduced copy holds NaN/Inf is reduced again uncompressed. The
reduced copy is identical on every rank, so every rank reaches the same verdict."""
import dataclasses
import threading
from typing import Callable, Optional, Union

import torch

from .. import _runtime
from .issue import Job


def nonfinite(tensor: torch.Tensor) -> torch.Tensor:
    """A 0-d bool tensor on the tensor's device: does it hold a NaN or an Inf? One pass (aminmax
    propagates NaN; an Inf is the min or the max), many times cheaper than isfinite().all()."""
    low, high = torch.aminmax(tensor)
    return ~(torch.isfinite(low) & torch.isfinite(high))


def fp16_of_fp32_on_cpu(half: torch.Tensor, single: torch.Tensor) -> bool:
    """Can _core's fp16 casts (runtime/include/acspeed/fp16_cast.h) take this pair: an fp16 copy and an
    fp32 bucket of the same size, contiguous, on the CPU? (They walk the raw memory.)"""
    return (half.dtype == torch.float16 and single.dtype == torch.float32 and half.device.type == "cpu"
            and single.device.type == "cpu" and half.numel() == single.numel()
            and half.is_contiguous() and single.is_contiguous())


def unpack_if_finite(reduced: torch.Tensor, flat: torch.Tensor) -> bool:
    """Copies the reduced copy into the bucket unless it holds NaN/Inf (then the bucket keeps its
    gradients, for the uncompressed re-send); returns whether it copied. An fp16 copy of an fp32
    bucket on the CPU (fp16 compression's case) is one C++ pass, the check reading the fp16 bits as
    they are widened (`_core.unpack_fp16_if_finite`): about torch's copy_ alone, where nonfinite()
    then copy_ cost a second full pass. Otherwise nonfinite(), then copy_."""
    if fp16_of_fp32_on_cpu(reduced, flat):
        return _runtime.core().unpack_fp16_if_finite(reduced.data_ptr(), flat.data_ptr(), flat.numel())
    if bool(nonfinite(reduced)):
        return False
    flat.copy_(reduced)
    return True


def can_overflow(compressed: torch.dtype, original: torch.dtype) -> bool:
    """Can a sum that `original` holds be too large for `compressed`? Only when `compressed`'s
    largest value is smaller by more than rounding at the edge of the range (bf16 against fp32: no;
    its largest value is within 0.4% of fp32's). Where it cannot, a non-finite compressed sum means
    a non-finite gradient, which re-sending uncompressed would not make finite: the fallback would only
    cost a pass over every bucket."""
    return torch.finfo(compressed).max < torch.finfo(original).max / 2


@dataclasses.dataclass
class FallbackEntry:
    """A compressed bucket whose verdict the step's last hook call settles."""
    job: Optional[Job]
    flat: torch.Tensor
    unpack: Callable[[], None]
    flag: Union[torch.Tensor, bool, None] = None  # set by the job's finish: NaN/Inf in the reduced copy
    ready: Optional[object] = None        # CUDA: event recorded after the flag, on the callback's CUDA stream
    reduced: Optional[torch.Tensor] = None  # CPU, a cast's: the reduced copy the step's last hook call unpacks
    cast: bool = False                    # a cast's bucket: its finish hands the reduced copy over (unpack_or_hold)
    late: Optional[Callable[["FallbackEntry"], None]] = None  # CPU, a cast's: settles it in its finish (leave())
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)  # hands `reduced` over (leave())

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

    def unpack_or_hold(self, reduced: torch.Tensor) -> bool:
        """Called by a cast's finish with the reduced copy (unpadded); always True: the finish leaves
        the bucket's future to whoever settles it. CUDA: its flag now, as hold(); the step's last hook
        call completes it. CPU: the last hook call unpacks it if finite (settle()), on the hook's
        thread, idle then, waiting for the step's later transfers, while the backend's thread that ran
        this finish goes straight on to the next collective; unless that call has already left the
        bucket to this finish (leave()): then it is settled here."""
        if self.flat.is_cuda:
            return self.hold(nonfinite(reduced))
        with self.lock:
            self.reduced = reduced
            late = self.late
        if late is not None:
            late(self)
        return True

    def leave(self, settle: Callable[["FallbackEntry"], None]) -> bool:
        """CPU, a cast's bucket: if its finish has not run yet, it will call settle(self) itself (on the
        backend's thread, when the reduction completes) and the caller need not wait for it: True.
        False: the finish ran already (or this is not a cast's bucket); the caller settles it."""
        if self.flat.is_cuda or not self.cast:
            return False
        with self.lock:
            if self.reduced is not None or self.job.finished.done():  # done without a copy: the reduction failed
                return False
            self.late = settle
            return True

    def settle(self) -> bool:
        """CPU, once the job's finish ran: unpacks a held cast's reduced copy unless it holds NaN/Inf
        (unpack_if_finite). True: the bucket must be re-sent uncompressed."""
        if self.reduced is not None:
            self.flag = not unpack_if_finite(self.reduced, self.flat)
            self.reduced = None
        return bool(self.flag)
