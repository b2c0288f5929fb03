"""Worker-side scenarios for online tuning (run inside ddp_harness ranks; tests/python/test_online.py).
The test-only clock seam (acspeed.online.testing) forces window times; everything else is real:
gloo, acspeed's hook, the boundary collective, the switches."""
import logging

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import acspeed
import acspeed._patch
import acspeed.online
from ddp_scenarios import environment, flat_params, make_model, train

# Short windows so a test settles in well under 200 steps of the tiny model.
WINDOWS = {"warmup": 2, "window_steps": 3, "discard_steps": 1}


class StepLog:
    """Per synchronised step: the config the hook reduced its buckets with (seen at bucket 1, after
    bucket 0 switched), and which buckets ran on which lane."""

    def __init__(self, state):
        self.state, self.steps = state, []

    def bucket_launched(self, index, nbytes):
        if index == 0:
            self.steps.append(self.state.config.describe())

    def bucket_completed(self, index):
        pass


def _tuned(ddp):
    state = acspeed._patch.state_of(ddp)
    log = StepLog(state)
    acspeed._patch.attach_observer(ddp, log)
    return state, state.stepper, log


def chooses_the_faster(rank: int, world_size: int) -> dict:
    """reduce_scatter (whatever its streams) is decisively faster from window 5 on; everything else
    takes 0.1 s a step."""
    acspeed.online.testing(clock=lambda r, window, config: 0.05 if config.algorithm == "reduce_scatter"
                           and window >= 5 else 0.1 + 0.001 * r, **WINDOWS)
    ddp = DDP(make_model(), bucket_cap_mb=0.001)
    state, stepper, log = _tuned(ddp)
    train(ddp, rank, 400, stop_when=lambda: stepper.done)
    windows = [[plan[0], plan[1], plan[2]] for _, plan in sorted(stepper.plans.items())]
    first_x = next(k for k, (ordinal, _, _) in enumerate(windows)
                   if stepper.configs[ordinal].algorithm == "reduce_scatter")
    out = {"ran": len(log.steps), "switches": stepper.switches, "steps": log.steps, "final": state.config.describe(),
           "first_x_window": first_x, "lanes": len(state.lanes)}
    if rank == 0:
        import json
        out["evidence"] = json.loads(stepper.tuner.evidence())
        out["decision"] = stepper.tuner.decision.describe()
        out["decision_algorithm"] = stepper.tuner.decision.algorithm
    return out


def identical_to_online_off(rank: int, world_size: int) -> dict:
    """The same training with ACSPEED_ONLINE=0 and tuned online while it switches algorithm and
    streams: no_sync accumulation, gradient_as_bucket_view=True, several buckets."""
    # reduce_scatter with 2 streams wins; the descent measures allreduce x 2 streams and
    # reduce_scatter x 1 on its way, so both knobs switch (and switch back) during exploration.
    acspeed.online.testing(clock=lambda r, window, config: 0.1 / (1 + (config.algorithm == "reduce_scatter")
                                                                     + (config.streams == 2)), **WINDOWS)
    steps = 120
    with environment(ACSPEED_ONLINE="0"):
        off = DDP(make_model(), bucket_cap_mb=0.001, gradient_as_bucket_view=True)
    assert acspeed._patch.state_of(off) is None
    train(off, rank, steps, micro=2)
    tuned = DDP(make_model(), bucket_cap_mb=0.001, gradient_as_bucket_view=True)
    state, stepper, log = _tuned(tuned)
    train(tuned, rank, steps, micro=2)
    return {"equal": torch.equal(flat_params(off), flat_params(tuned)), "switches": stepper.switches,
            "ran": sorted({(stepper.configs[ordinal].algorithm, stepper.configs[ordinal].streams)
                           for _, ordinal in stepper.switches}),
            "done": stepper.done, "steps": log.steps}


def joins_with_uneven_inputs(rank: int, world_size: int) -> dict:
    """Rank 1 runs out of batches first and joins while windows still switch configs."""
    acspeed.online.testing(clock=lambda r, window, config: 0.05 if config.streams == 2 else 0.1, **WINDOWS)
    ddp = DDP(make_model(), bucket_cap_mb=0.001)
    state, stepper, log = _tuned(ddp)
    steps = 60 if rank == 0 else 35
    with ddp.join():
        train(ddp, rank, steps)
    return {"counted": len(log.steps), "switches": stepper.switches, "done": stepper.done}


def second_model_and_settings(rank: int, world_size: int) -> dict:
    """Which DDP models are tuned: the first of the process only; never with ACSPEED_ONLINE=0 or over
    ACSPEED_CONFIG unless ACSPEED_ONLINE=1; a user's own comm hook ends tuning."""
    acspeed.online.testing(**WINDOWS)
    out = {}
    with environment(ACSPEED_ONLINE="0"):
        out["off"] = acspeed._patch.state_of(DDP(make_model())) is None
    first = DDP(make_model())
    out["first"] = acspeed._patch.state_of(first).stepper is not None
    second = DDP(make_model())
    out["second"] = acspeed._patch.state_of(second)
    out["second"] = None if out["second"] is None else out["second"].stepper
    state = acspeed._patch.state_of(first)
    stepper = state.stepper
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    first.register_comm_hook(dist.group.WORLD, default_hooks.allreduce_hook)
    train(first, rank, 5)
    out["stopped"] = stepper.stopped
    return out


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def _listen() -> _Lines:
    lines = _Lines()
    logging.getLogger("acspeed").addHandler(lines)
    return lines


def remembers_the_decision(rank: int, world_size: int, run: int) -> dict:
    """Run 1 tunes online (reduce_scatter forced faster) and stores the decision; run 2, the same
    job, applies it from its first step with no window collective."""
    acspeed.online.testing(clock=lambda r, window, config: 0.05 if config.algorithm == "reduce_scatter" else 0.1,
                           **WINDOWS)
    lines = _listen()
    ddp = DDP(make_model(), bucket_cap_mb=0.001)
    state = acspeed._patch.state_of(ddp)
    log = StepLog(state)
    acspeed._patch.attach_observer(ddp, log)
    stepper = state.stepper
    out = {"tuned": stepper is not None}
    if run == 1:
        train(ddp, rank, 400, stop_when=lambda: stepper.done)
        out["stored"] = stepper.wait_stored() if rank == 0 else None
        out["switches"] = stepper.switches
    else:
        train(ddp, rank, 3)
    out.update(steps=log.steps, algorithm=state.config.algorithm, lines=lines.lines)
    return out


def ends_before_settling(rank: int, world_size: int) -> dict:
    acspeed.online.testing(**WINDOWS)
    lines = _listen()
    ddp = DDP(make_model())
    stepper = acspeed._patch.state_of(ddp).stepper
    train(ddp, rank, 8)
    if rank == 0:
        acspeed.online._at_exit(lambda: stepper)  # what the interpreter's exit runs
    return {"done": stepper.done, "lines": lines.lines}


def a_switch_that_cannot_be_set_up(rank: int, world_size: int) -> dict:
    """Rank 1 cannot create the process groups of a new config's lanes: every rank stops tuning at
    that boundary, keeps the config it ran, and trains on."""
    import acspeed.engine.lanes
    acspeed.online.testing(**WINDOWS)
    lines = _listen()
    ddp = DDP(make_model(), bucket_cap_mb=0.001)
    state, stepper, log = _tuned(ddp)
    if rank == 1:  # each group is created (a collective every rank must join), then refused
        real_new_group = acspeed.engine.lanes._new_group
        kept = []  # alive, as a group that exists but failed: no peer sees its connections close

        def refuse(ranks, backend):
            kept.append(real_new_group(ranks, backend))
            raise RuntimeError("injected on rank 1")
        acspeed.engine.lanes._new_group = refuse
    params = train(ddp, rank, 40)
    return {"stopped": stepper.stopped, "steps": log.steps, "switches": stepper.switches, "lines": lines.lines,
            "params": params, "stepper": state.stepper is None}
