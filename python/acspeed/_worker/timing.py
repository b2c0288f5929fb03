"""The trial's timed steps and the compute-only step: each runs the one step loop (steps.py) with
its own callback, and returns the result message (protocol.py)."""
import math
import os
import time
from typing import List

import torch
import torch.distributed as dist

from acspeed import _patch, _probes
from acspeed._worker import protocol, steps


def timed(trainer, request: dict, config, optimizer, scaler, control_group, rebuild_s: float) -> dict:
    """`warmup` untimed and `steps` timed steps on the trial's batch; the result message with the
    step times (max over ranks), the losses (mean over ranks), the CPU floor, PowerSGD's own
    compute and the probe's breakdown."""
    warmup, count = int(request["warmup"]), int(request["steps"])
    if config.compression_info.ranked:  # uncompressed before its start step: time compressed steps
        warmup = max(warmup, config.powersgd_start_step + 2)
    timer = _TimedSteps(trainer, warmup)
    losses = steps.train_steps(trainer.ddp, [(trainer.inputs, trainer.targets)] * (warmup + count), trainer.autocast,
                               scaler, optimizer, timer)
    busy_end = _probes.cores_busy_seconds(timer.cores) if timer.busy_start is not None else None
    world = dist.get_world_size()
    step_times = torch.tensor(timer.times, dtype=torch.float64)
    dist.all_reduce(step_times, op=dist.ReduceOp.MAX, group=control_group)
    # The CPU floor: busy seconds of this rank's cores per timed step, over their count (cpu_busy.h);
    # the worst rank's. -1: not measured (every rank alike): /proc/stat not readable, or a GPU job,
    # where the host thread's spin-wait in synchronisation would count as busy.
    floor = torch.tensor([(busy_end - timer.busy_start) / count / len(timer.cores)
                          if busy_end is not None and count else -1.0], dtype=torch.float64)
    dist.all_reduce(floor, op=dist.ReduceOp.MAX, group=control_group)
    finite = all(math.isfinite(x) for x in losses)
    trajectory = torch.tensor(losses, dtype=torch.float64)
    flags = torch.tensor([1.0 if finite else 0.0], dtype=torch.float64)
    dist.all_reduce(trajectory, op=dist.ReduceOp.SUM, group=control_group)
    dist.all_reduce(flags, op=dist.ReduceOp.MIN, group=control_group)
    trajectory /= world
    result = protocol.result(request["id"], step_times_s=step_times.tolist(), loss_first=trajectory[0].item(),
                             loss=trajectory[-1].item(), losses=trajectory.tolist(), warmup_steps=warmup,
                             finite=bool(flags[0].item() > 0), rebuild_s=rebuild_s)
    if floor.item() >= 0:
        result["cpu_floor_s"] = floor.item()
    state = _patch.state_of(trainer.ddp)
    if state is not None and state.powersgd is not None:
        timed_compute = state.powersgd.compute_s[-count:]
        cost = torch.tensor([sorted(timed_compute)[len(timed_compute) // 2] if timed_compute else 0.0],
                            dtype=torch.float64)
        dist.all_reduce(cost, op=dist.ReduceOp.MAX, group=control_group)
        result["compression_s"] = cost.item()
    if trainer.probe is not None:
        summary = trainer.probe.summary([50.0], group=control_group)
        row = summary["rows"][0]
        result.update(compute_s=row["compute_s"], comm_s=row["comm_s"],
                      exposed_comm_s=row["exposed_comm_s"], probe=trainer.probe_name)
        if summary["buckets"]:  # acspeed's hook reported its buckets: what the step model needs
            result.update(bucket_count=len(summary["buckets"]),
                          bucket_bytes=sum(b["bytes"] for b in summary["buckets"]))
    return result


def compute_only(trainer, request: dict, control_group, rebuild_s: float) -> dict:
    """The compute-only step of the step model: forward, backward and the optimizer on the bare
    model, no DDP and no communication, each phase timed (on a GPU the device is synchronized
    around each phase; the phases are timed on every rank and combined as the max over ranks)."""
    optimizer, scaler = steps.training(trainer.model.parameters(), trainer.precision, trainer.device)
    warmup, count = int(request["warmup"]), int(request["steps"])
    timer = _PhaseTimes(trainer, warmup)
    losses = steps.train_steps(trainer.model, [(trainer.inputs, trainer.targets)] * (warmup + count), trainer.autocast,
                               scaler, optimizer, timer)
    table = torch.tensor(timer.phases, dtype=torch.float64)
    dist.all_reduce(table, op=dist.ReduceOp.MAX, group=control_group)
    finite = torch.tensor([1.0 if all(math.isfinite(x) for x in losses) else 0.0], dtype=torch.float64)
    dist.all_reduce(finite, op=dist.ReduceOp.MIN, group=control_group)
    trainer.model.load_state_dict(trainer.initial_state)
    return protocol.result(request["id"], step_times_s=table[:, 0].tolist(), finite=bool(finite[0].item() > 0),
                           rebuild_s=rebuild_s, forward_s=table[:, 1].quantile(0.5).item(),
                           optimizer_s=table[:, 2].quantile(0.5).item())


class _TimedSteps(steps.StepCallback):
    """The timed trial's steps: from step `warmup` on, each step's time (the device synchronised
    around it), the probe's marks, and the busy time of this rank's cores (CPU)."""

    def __init__(self, trainer, warmup: int):
        self.trainer, self.probe, self.warmup = trainer, trainer.probe, warmup
        self.cores = sorted(os.sched_getaffinity(0))
        self.busy_start = None
        self.times: List[float] = []
        self._start = 0.0

    def begin(self, index: int) -> None:
        timed = index >= self.warmup
        if index == self.warmup and self.probe is not None:
            self.probe.reset()
        self.trainer._sync()
        if index == self.warmup and self.trainer.device.type == "cpu":
            self.busy_start = _probes.cores_busy_seconds(self.cores)
        self._start = time.perf_counter()
        if timed and self.probe is not None:
            self.probe.step_begin()

    def backward_end(self, index: int) -> None:
        if index >= self.warmup and self.probe is not None:
            self.probe.backward_end()

    def end(self, index: int) -> None:
        timed = index >= self.warmup
        if timed and self.probe is not None:
            self.probe.step_end()
        self.trainer._sync()
        if timed:
            self.times.append(time.perf_counter() - self._start)


class _PhaseTimes(steps.StepCallback):
    """The compute-only steps: from step `warmup` on, [step, forward, optimizer] seconds, the device
    synchronised around each phase."""

    def __init__(self, trainer, warmup: int):
        self.trainer, self.warmup = trainer, warmup
        self.phases: List[List[float]] = []
        self._marks: List[float] = []

    def _mark(self) -> None:
        self.trainer._sync()
        self._marks.append(time.perf_counter())

    def begin(self, index: int) -> None:
        self._marks = []
        self._mark()

    def forward_end(self, index: int) -> None:
        self._mark()

    def backward_end(self, index: int) -> None:
        self._mark()

    def end(self, index: int) -> None:
        self._mark()
        start, forward_end, backward_end, end = self._marks
        if index >= self.warmup:
            self.phases.append([end - start, forward_end - start, end - backward_end])
