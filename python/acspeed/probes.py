"""Step probes: how much of each DDP training step is compute, communication, and communication the
step had to wait for (exposed communication). The tuner's trial worker and the benchmark's
``--profile`` use it; the measuring is done in C++ (``acspeed._probes``, probes/ in the source tree).

Usage in a training loop::

    probe = StepProbe(ddp_model)              # picks the CUPTI backend on a GPU, else the CPU one
    hook_state.observer = probe               # optional: per-bucket times (see BucketObserver)
    for batch in batches:
        probe.step_begin()
        loss = loss_fn(ddp_model(x), y)
        loss.backward()
        probe.backward_end()
        optimizer.step()
        probe.step_end()                      # synchronizes the CUDA device for a CUDA model
    print(probe.format(probe.summary()))      # all ranks call summary(): it gathers across ranks

Backends (first enabled wins; ``StepProbe.notes`` says why the others were skipped):

* ``cupti`` (CUDA model, GPU and driver present, no other CUPTI client such as a running
  torch.profiler): GPU activity inside each step. NCCL kernels (``ncclDevKernel_*``,
  ``ncclSymkDevKernel_*``, ``ncclKernel_*``) are communication, other kernels and memcpy/memset are
  compute; exposed communication = NCCL kernel time that no compute kernel overlaps.
* ``cpu`` (everywhere): host clocks. Compute runs from ``step_begin`` to the last parameter
  gradient (post-accumulate-grad hooks) and from ``backward_end`` to ``step_end``. With a comm hook
  that reports to the probe (BucketObserver), each bucket's communication runs from its launch to
  its completion, and exposed communication is the part after the last gradient: from the end of
  backward compute to the last bucket's completion.
  Without a hook (DDP's built-in allreduce: the baseline) the probe adds only gradient hooks and
  never changes or wraps a collective; exposed communication is then read at the autograd boundary,
  from the last gradient to ``loss.backward()`` returning. That is an upper bound: it includes DDP's
  own finalize work (copying bucket results back into ``.grad``). To separate the two, run the same
  model at world size 1, where this wait holds no network time, and subtract its exposed time.

Cross-rank rule: per step, the maximum over ranks of wall, compute, communication and exposed time
(and of each bucket's time), the minimum over ranks of the overlap ratio; percentiles are then taken
over the combined steps, each metric separately.
"""
from __future__ import annotations

import typing

import torch

from acspeed import _probes

PERCENTILES = (50.0, 75.0, 90.0, 95.0)


@typing.runtime_checkable
class BucketObserver(typing.Protocol):
    """What a DDP comm hook reports to a probe, per gradient bucket.

    ``bucket_launched(index, nbytes)``: call it immediately BEFORE issuing bucket ``index``'s
    collective(s), ON THE THREAD THAT ISSUES THEM: the CUPTI backend tags the CUDA work that thread
    launches next with the bucket (CUPTI external correlation is per thread), so a hook that hands
    the bucket to a worker thread calls it there, just before the collective. ``nbytes`` is what the
    bucket carries before compression (``bucket.buffer().numel() * bucket.buffer().element_size()``).
    Called on another thread, the CPU backend is unaffected and the CUPTI backend still measures
    communication and exposed communication, but cannot attribute NCCL time to buckets.

    ``bucket_completed(index)``: call it when the bucket's result is ready, from a callback chained
    on the collective's future (``fut.then(...)``) BEFORE the future returned to DDP completes, so
    DDP cannot finish backward first.

    Neither raises: events outside a step are counted (``StepProbe.unmatched_events``), never an
    error inside DDP's communication. A ``StepProbe`` is a ``BucketObserver``.
    """

    def bucket_launched(self, index: int, nbytes: int) -> None: ...

    def bucket_completed(self, index: int) -> None: ...


def torch_profiler_active() -> bool:
    """Whether torch.profiler / torch.autograd.profiler is recording in this process."""
    enabled = getattr(torch._C._autograd, "_profiler_enabled", None)
    return bool(enabled()) if enabled is not None else False


class StepProbe:
    """Per-step measurement of one (DDP-wrapped) model. See the module docstring.

    ``backend``: "auto" (default), "cupti" or "cpu"; naming one that cannot run here is a ValueError
    carrying the reason.
    """

    def __init__(self, model: torch.nn.Module, *, backend: str = "auto"):
        params = [p for p in model.parameters() if p.requires_grad]
        self._cuda = any(p.is_cuda for p in params)
        self._recorder = _probes.Recorder(device="cuda" if self._cuda else "cpu", backend=backend,
                                          external_profiler_active=torch_profiler_active())
        self.backend: str = self._recorder.name
        self.notes: list[str] = list(self._recorder.notes)
        # The BucketObserver methods are the C++ ones: no Python frame on the communication path.
        self.bucket_launched = self._recorder.bucket_launched
        self.bucket_completed = self._recorder.bucket_completed
        self._handles = []
        if self._recorder.needs_grad_marks:
            mark = self._recorder.grad_ready
            for p in params:
                self._handles.append(p.register_post_accumulate_grad_hook(lambda _p: mark()))

    def step_begin(self) -> None:
        self._recorder.step_begin()

    def backward_end(self) -> None:
        """Call right after ``loss.backward()`` returns."""
        self._recorder.backward_end()

    def step_end(self) -> None:
        if self._cuda:
            torch.cuda.synchronize()
        self._recorder.step_end()

    @property
    def unmatched_events(self) -> int:
        return self._recorder.unmatched_events

    def steps(self) -> list[dict]:
        """This rank's completed steps: dicts of wall_ns, compute_ns, comm_ns, exposed_comm_ns,
        overlap_ratio and buckets [{index, bytes, comm_ns}]."""
        return self._recorder.profiles()

    def reset(self) -> None:
        """Forgets recorded steps (between trials)."""
        self._recorder.reset()

    def summary(self, percentiles: typing.Sequence[float] = PERCENTILES, *, group=None,
                combine_ranks: bool = True) -> dict:
        """Percentile breakdown of the recorded steps. When torch.distributed is initialized and
        ``combine_ranks`` is true, every rank of ``group`` must call it: the per-step records are
        all-gathered (call it outside the timed region) and combined by the module's rule.

        Returns {steps, ranks, backend, combine, rows: [{percentile, wall_s, compute_s, comm_s,
        exposed_comm_s, overlap_ratio}], buckets: [{index, bytes, comm_s_p50, steps}], notes,
        unmatched_events}."""
        steps = self.steps()
        ranks = 1
        notes = self.notes + list(self._recorder.warnings)
        unmatched = self.unmatched_events
        if combine_ranks and torch.distributed.is_available() and torch.distributed.is_initialized():
            ranks = torch.distributed.get_world_size(group)
            gathered = [None] * ranks
            torch.distributed.all_gather_object(gathered, (steps, unmatched), group=group)
            steps = _probes.combine_ranks([g[0] for g in gathered])
            unmatched = sum(g[1] for g in gathered)
        summary = _probes.summarize(steps, [float(p) for p in percentiles], ranks, self.backend)
        summary["notes"] = notes
        summary["unmatched_events"] = unmatched
        return summary

    @staticmethod
    def format(summary: dict) -> str:
        """The summary as one table (units in the header), then its notes."""
        lines = [_probes.format_summary(summary).rstrip("\n")]
        lines += [f"note: {n}" for n in summary.get("notes", [])]
        if summary.get("unmatched_events"):
            lines.append(f"note: {summary['unmatched_events']} bucket events matched no step")
        return "\n".join(lines)

    def close(self) -> None:
        """Removes the gradient hooks and stops the backend (CUPTI tracing ends here, so another
        CUPTI client such as torch.profiler can start). Later calls raise RuntimeError."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._recorder.close()
