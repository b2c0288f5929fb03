"""When the phases of a bucket's reduction are issued, so that every rank issues the same
collectives on the same groups in the same order, with no thread of acspeed's own.

Where the order comes from: DDP's reducer calls the comm hook from `Reducer::mark_bucket_ready`
(torch/csrc/distributed/c10d/reducer.cpp), which launches buckets strictly in bucket-index order
(`next_bucket_` only advances over ready buckets, in sequence), on the thread running backward;
`GradBucket.is_last()` marks the last. The hook checks that order at run time (state.py). Everything
below is issued from the hook call itself, never from a future callback (those run on backend
threads, in completion order, which differs between ranks).

Two issuers, the first enabled one wins (ISSUERS):

  StreamOrdered (CUDA tensors on NCCL): every phase is issued in the hook call. The lane's CUDA
    stream first waits on the compute CUDA stream; each collective's NCCL CUDA stream waits on the
    lane's at issue time, and between phases the lane's CUDA stream waits on the previous phase's
    work (Work.synchronize: a CUDA stream wait, never a host wait). Phases of one role share one
    communicator.
  CompletionOrdered (everything else: gloo on the CPU): the first phase is issued in the hook call.
    Later phases wait in per-(lane, phase) queues, in bucket order; each hook call issues, non-
    blocking, every queued phase whose predecessor completed, and the last bucket's hook call
    drains the queues, waiting where it must. Every phase has a group of its own, so on each group
    collectives are issued in bucket order on every rank whatever the timing of completions.

When a bucket's last phase is issued, a callback chained on its work (`then`) runs the job's
`finish` (unpacking, the fallback's NaN/Inf flag; a bucket it holds is left to the step's last hook
call, state.py) and completes `job.result`, the future DDP waits on.
"""
import collections
import contextlib
import dataclasses
import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

import torch

from .lanes import Lane

Issue = Optional[Callable[[object], object]]  # group -> Work (or None: nothing sent); None: nothing to do in that phase


@dataclasses.dataclass
class Job:
    """One bucket's reduction in flight."""
    index: int
    lane: Lane
    phases: List[Issue]               # one entry per lane slot (algorithms.py)
    finish: Callable[[], Optional[torch.Tensor]]  # after the last phase; None leaves `result` to the fallback
    result: torch.futures.Future      # what DDP waits on
    delay_s: float = 0.0              # test-only seam: sleep before issuing each collective
    next: int = 0                     # next phase to issue
    pending: Optional[object] = None  # the Work of the phase issued last
    finished: Optional[torch.futures.Future] = None  # completes once `finish` has run


def _issue_phase(job: Job) -> None:
    issue, group = job.phases[job.next], job.lane.slots[job.next]
    job.next += 1
    if issue is None or group is None:
        return
    if job.delay_s:
        time.sleep(job.delay_s)
    work = issue(group)
    if work is not None:  # a phase with nothing to send on this rank keeps its predecessor's Work
        job.pending = work


def _chain_finish(job: Job) -> None:
    """Runs job.finish after the last issued collective and completes job.result with its value."""

    def run(done: Optional[torch.futures.Future]):
        try:
            if done is not None:
                done.value()  # raises the collective's error, if any (Work.wait here would deadlock)
            value = job.finish()
        except BaseException as error:  # noqa: BLE001 - handed to DDP, which raises it in backward
            job.result.set_exception(error)
            raise
        if value is not None:
            job.result.set_result(value)
        return value

    if job.pending is None:  # no collective at all for this rank
        job.finished = torch.futures.Future()
        job.finished.set_result(run(None))
        return
    job.finished = job.pending.get_future().then(run)


class StreamOrdered:
    group_per_phase = False
    uses_streams = True

    @staticmethod
    def enabled(device: torch.device, backend: str) -> bool:
        return device.type == "cuda" and "nccl" in backend

    def context(self, lane: Lane):
        """Where the hook packs and issues: the lane's CUDA stream, after the compute CUDA stream."""
        current = torch.cuda.current_stream(lane.stream.device)
        lane.stream.wait_stream(current)
        return torch.cuda.stream(lane.stream)

    def start(self, job: Job) -> None:
        while job.next < len(job.phases):
            before = job.pending
            if before is not None and job.phases[job.next] is not None and job.lane.slots[job.next] is not None:
                block_stream(before)
            _issue_phase(job)
        _chain_finish(job)

    def advance(self, block: bool) -> None:
        """Nothing waits here: all phases were issued in the hook call."""


def block_stream(work) -> None:
    """Makes the current CUDA stream wait for NCCL `work` (no host wait): Work.synchronize(), an event
    wait on the current stream in every torch acspeed supports and in both of torch 2.15's NCCL
    process groups. Not block_current_stream(): the classic group's is synchronize(), but nccl2's
    Work does not override it, so c10d's generic one runs, a spin kernel released from the Work's
    future (docs/nccl2.md)."""
    work.synchronize()


class CompletionOrdered:
    group_per_phase = True
    uses_streams = False

    @staticmethod
    def enabled(device: torch.device, backend: str) -> bool:
        return True

    def __init__(self):
        # (lane index, phase) -> jobs waiting to issue that phase, in bucket order
        self._queues: Dict[Tuple[int, int], collections.deque] = {}
        self._lock = threading.Lock()  # DDP calls hooks from the backward thread; finalizers may differ

    def context(self, lane: Lane):
        return contextlib.nullcontext()

    def start(self, job: Job) -> None:
        with self._lock:
            _issue_phase(job)
            self._forward(job)

    def _forward(self, job: Job) -> None:
        if job.next < len(job.phases):
            self._queues.setdefault((job.lane.index, job.next), collections.deque()).append(job)
        else:
            _chain_finish(job)

    def advance(self, block: bool) -> None:
        """Issues, in queue order, every phase whose predecessor completed; with block, all of them
        (waiting for each predecessor), until no job is left waiting."""
        with self._lock:
            while self._pass(block) and block:
                pass

    def _pass(self, block: bool) -> bool:
        """One sweep, lane by lane and phase by phase (a job can move through several phases in one
        sweep). Returns whether jobs are still waiting."""
        for key in sorted(self._queues):
            queue = self._queues[key]
            while queue:
                job = queue[0]
                if job.pending is not None:
                    if not (block or job.pending.is_completed()):
                        break
                    job.pending.wait()  # raises the predecessor's error here, in the hook
                queue.popleft()
                _issue_phase(job)
                self._forward(job)
        return any(self._queues.values())


ISSUERS = (StreamOrdered, CompletionOrdered)


def issuer_for(device: torch.device, backend: str):
    return next(kind for kind in ISSUERS if kind.enabled(device, backend))()
