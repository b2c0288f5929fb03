"""Worker-side scenarios for online tuning (run inside ddp_harness ranks; tests/python/test_online.py).
The test-only clock seam (acspeed.online.testing) forces window times; everything else is real:
gloo, acspeed's hook, the boundary collective, the switches."""
import logging
import os

import torch
import torch._dynamo
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import acspeed
import acspeed._patch
import acspeed.online
import acspeed.reducer
from ddp_scenarios import _write, batches, environment, flat_params, make_model, train

# Short windows so a test settles in well under 200 steps of the tiny model.
WINDOWS = {"warmup": 2, "window_steps": 3, "discard_steps": 1}


class StepLog:
    """Per synchronised step of the tuned DDP model on this rank: the comm hook DDP's logger names for
    the reducer the step runs (None: no comm hook at all) and its bucket cap, read in a forward
    pre-hook that runs after acspeed's (which switched there); then the config acspeed's hook
    reduced the step's buckets with, seen at bucket 0 after any switch there (None: no hook of
    acspeed's ran in the step). Each step is [hook name, bucket cap bytes, acspeed's config]."""

    def __init__(self, ddp, state):
        self.state, self.steps = state, []
        self._handle = ddp.register_forward_pre_hook(self._forward)
        acspeed._patch.attach_observer(ddp, self)

    def _forward(self, ddp, args):
        if torch.is_grad_enabled() and ddp.require_backward_grad_sync:
            data = ddp._get_ddp_logging_data()
            self.steps.append([data.get("comm_hook"), data.get("bucket_cap_bytes"), None])

    def bucket_launched(self, index, nbytes):
        if index == 0:
            self.steps[-1][2] = self.state.config.describe()

    def bucket_completed(self, index):
        pass

    def close(self) -> None:
        """The pre-hook leaves the DDP model, the observer acspeed's hook."""
        self._handle.remove()
        self.state.observer = None


def windows_as_run(stepper, log: StepLog) -> list:
    """Each window this rank ran (its plan's steps, from the warm-up's end on, up to the decision):
    [its config, whether that config needs a comm hook (the runtime's answer), whether it is the
    job's own DDP, the distinct (hook name, bucket cap, acspeed's config) its steps ran with]."""
    windows, first = [], stepper.warmup
    for _, (ordinal, steps, settled) in sorted(stepper.plans.items()):
        if settled or first + steps > len(log.steps):
            break
        config = stepper.configs[ordinal]
        seen = sorted({tuple(step) for step in log.steps[first:first + steps]}, key=str)
        windows.append([config.describe(), config.needs_comm_hook(), ordinal == stepper.baseline, seen,
                        config.bucket_cap_mb])
        first += steps
    return windows


class Rebuilds:
    """Counts the reducer rebuilds online tuning makes (acspeed.reducer.rebuild), with the tuned
    model's step count at each."""

    def __init__(self):
        self.steps, self._real = [], acspeed.reducer.rebuild
        acspeed.reducer.rebuild = self._rebuild

    def _rebuild(self, ddp, *args):
        self.steps.append(acspeed.online._STEPPERS[ddp].steps)
        return self._real(ddp, *args)

    def close(self) -> list:
        acspeed.reducer.rebuild = self._real
        return self.steps


def _tuned(ddp):
    state = acspeed._patch.state_of(ddp)
    return state, state.stepper, StepLog(ddp, state)


def chooses_the_faster(rank: int, world_size: int) -> dict:
    """X, the first config run from window 4 on that no window ran before (the second candidate: the
    first one's pair and the two waits for its result fill windows 0-3), is decisively faster (0.05 s a
    step); everything else takes 0.1 s. Every rank runs the same windows, so every rank's clock picks
    the same X."""
    seen_before, x = set(), []

    def clock(r, window, config):
        name = config.describe()
        if window < 4:
            seen_before.add(name)
        elif not x and name not in seen_before:
            x.append((window, name))
        return 0.05 if x and name == x[0][1] else 0.1 + 0.001 * r

    acspeed.online.testing(clock=clock, **WINDOWS)
    ddp = DDP(make_model(), bucket_cap_mb=0.001)
    state, stepper, log = _tuned(ddp)
    train(ddp, rank, 400, stop_when=lambda: stepper.done)
    windows = [[plan[0], plan[1], plan[2]] for _, plan in sorted(stepper.plans.items())]
    first_x = next(k for k, (ordinal, _, _) in enumerate(windows) if stepper.configs[ordinal].describe() == x[0][1])
    out = {"ran": len(log.steps), "switches": stepper.switches, "steps": log.steps, "final": state.config.describe(),
           "x": x[0], "first_x_window": first_x, "lanes": len(state.lanes), "windows": windows_as_run(stepper, log)}
    if rank == 0:
        import json
        out["evidence"] = json.loads(stepper.tuner.evidence())
        out["decision"] = stepper.tuner.decision.describe()
    return out


def make_wide_model(width: int = 600) -> torch.nn.Module:
    """Four width x width layers: the CPU's bucket sizes, 5 MiB and DDP's 25 MiB with its 1 MiB
    first bucket, cut them into different buckets (600: 5.8 MB of fp32 parameters, two buckets at
    5 MiB; 320: 1.7 MB, one bucket at 5 MiB, two at DDP's default). make_model's 36 kB fit one bucket
    at any size, so its bucket switches rebuild nothing."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(24, width), torch.nn.Tanh()]
    for _ in range(4):
        layers += [torch.nn.Linear(width, width), torch.nn.Tanh()]
    layers.append(torch.nn.Linear(width, 5))
    return torch.nn.Sequential(*layers)


def _session_windows(db: str, session_id: int) -> list:
    """The stored online session's windows in order: (algorithm, streams, bucket MiB) of each."""
    import json
    import sqlite3
    with sqlite3.connect(db) as store:
        rows = store.execute("SELECT config_json FROM trials WHERE session_id = ? ORDER BY ordinal",
                             (session_id,)).fetchall()
    configs = [json.loads(row[0]) for row in rows]
    return [(c.get("algorithm", "allreduce"), c.get("streams", 1), c.get("bucket_cap_mb") or 25) for c in configs]


def identical_to_online_off(rank: int, world_size: int) -> dict:
    """The same training with ACSPEED_ONLINE=0 and tuned online while it switches algorithm, streams
    and bucket size (a rebuilt reducer): no_sync accumulation, gradient_as_bucket_view=True, a model
    the two bucket sizes cut differently. Rank 0 reads the stored session's windows."""
    # Every knob's other value is faster, so the descent moves on each (and back while pairing): the
    # decision is reduce_scatter, 2 streams, 5 MiB buckets.
    acspeed.online.testing(clock=lambda r, window, config: 0.1 / (1 + (config.algorithm == "reduce_scatter")
                                                                     + (config.streams == 2)
                                                                     + (config.bucket_cap_mb == 5)), **WINDOWS)
    steps = 110
    with environment(ACSPEED_ONLINE="0"):
        off = DDP(make_wide_model(), gradient_as_bucket_view=True)
    assert acspeed._patch.state_of(off) is None
    train(off, rank, steps, micro=2)
    tuned = DDP(make_wide_model(), gradient_as_bucket_view=True)
    state, stepper, log = _tuned(tuned)
    rebuilds = Rebuilds()
    train(tuned, rank, steps, micro=2)
    log.close()
    base, result = flat_params(off), flat_params(tuned)
    out = {"equal": torch.equal(base, result),
           "difference": float((base - result).abs().max() / base.abs().max()), "switches": stepper.switches,
           "done": stepper.done, "steps": log.steps, "cap": tuned.bucket_bytes_cap,
           "windows_as_run": windows_as_run(stepper, log), "rebuilds": rebuilds.close(),
           "hooked": acspeed._patch.state_of(tuned) is state, "pre_hooks": len(tuned._forward_pre_hooks),
           "final": (state.config.algorithm, state.config.streams, state.config.bucket_cap_mb)}
    if rank == 0:
        stored = stepper.wait_stored()
        out["windows"] = _session_windows(os.environ["ACSPEED_DB"], stored["session_id"])
        out["spans"] = _session_spans(os.environ["ACSPEED_DB"], stored["session_id"])
    return out


def _session_spans(db: str, session_id: int) -> dict:
    """The stored online session's windows as they ran: first step -> steps discarded there; the
    step the unmeasured window before the decision starts at; the step the decision runs from."""
    import json
    import sqlite3
    with sqlite3.connect(db) as store:
        rows = store.execute("SELECT metrics_json FROM trials WHERE session_id = ? ORDER BY ordinal",
                             (session_id,)).fetchall()
        options = json.loads(store.execute("SELECT options_json FROM sessions WHERE id = ?",
                                           (session_id,)).fetchone()[0])
    windows = [json.loads(metrics)["online_window"] for (metrics,) in rows]
    return {"discarded": {w["first_step"]: w["discarded"] for w in windows},
            "unmeasured_from": max(w["first_step"] + w["steps"] for w in windows),
            "decision_from": options["online"]["decision_from_step"]}


def end_state_is_what_the_next_run_builds(rank: int, world_size: int, folder: str) -> dict:
    """Two jobs' worth of tuning in one process: (1) only 5 MiB buckets are faster: the decision
    needs no hook, so the settled DDP holds a rebuilt reducer with 5 MiB buckets and no hook of
    acspeed's, like a DDP built from that decision; (2) nothing is faster: "keep DDP defaults", the
    job's own buckets and no hook, probe or window collective left."""
    out = {}
    acspeed.online.testing(clock=lambda r, window, config: 0.05 if config.bucket_cap_mb == 5 else 0.1, **WINDOWS)
    tuned = DDP(make_wide_model())
    state, stepper, log = _tuned(tuned)
    train(tuned, rank, 300, stop_when=lambda: stepper.done)
    decided = stepper.config
    windows_seen = len(log.steps)
    train(tuned, rank, 3)  # the decision's first steps: no hook at all
    log.close()
    with environment(ACSPEED_ONLINE="0", ACSPEED_CONFIG=_write(folder, "decision.json", decided.to_json())):
        fresh = DDP(make_wide_model())
    train(fresh, rank, 3)
    data, fresh_data = tuned._get_ddp_logging_data(), fresh._get_ddp_logging_data()
    out["bucket"] = {"decided": decided.describe(), "needs_hook": decided.needs_comm_hook(),
                     "state": acspeed._patch.state_of(tuned), "fresh_state": acspeed._patch.state_of(fresh),
                     "lanes": len(state.lanes), "pre_hooks": len(tuned._forward_pre_hooks),
                     "after_settling": log.steps[windows_seen:], "windows_as_run": windows_as_run(stepper, log),
                     "logging": [{key: d.get(key) for key in ("bucket_cap_bytes", "comm_hook")}
                                 for d in (data, fresh_data)],
                     "buckets": [[b.buffer().numel() for b in d.reducer._get_zeros_like_grad_buckets()]
                                 for d in (tuned, fresh)]}
    del tuned, fresh, state, stepper
    acspeed.online._started = False  # a second job's worth in this process (test only)
    acspeed.online.testing(clock=lambda r, window, config: 0.1, **WINDOWS)
    tuned = DDP(make_model())
    state, stepper, log = _tuned(tuned)
    log.close()
    collectives = []
    real_all_reduce = dist.all_reduce

    def counting(tensor, *args, **kwargs):
        collectives.append(kwargs.get("group"))
        return real_all_reduce(tensor, *args, **kwargs)
    dist.all_reduce = counting
    try:
        train(tuned, rank, 300, stop_when=lambda: stepper.done)
        exploring = len(collectives)
        train(tuned, rank, 5)
    finally:
        dist.all_reduce = real_all_reduce
    out["defaults"] = {"decided": stepper.config.describe(), "kept": stepper.config == stepper.configs[stepper.baseline],
                       "state": acspeed._patch.state_of(tuned), "lanes": len(state.lanes),
                       "pre_hooks": len(tuned._forward_pre_hooks), "cap": tuned.bucket_bytes_cap,
                       "comm_hook": tuned._get_ddp_logging_data().get("comm_hook"),
                       "window_collectives": exploring, "collectives_after": len(collectives) - exploring}
    return out


def joins_with_uneven_inputs(rank: int, world_size: int) -> dict:
    """Rank 1 runs out of batches first and joins while windows still switch configs, the bucket
    size among them (a rebuilt reducer: the joined rank rebuilds in DDP's join hook)."""
    acspeed.online.testing(clock=lambda r, window, config: 0.1 / (1 + (config.streams == 2) + (config.bucket_cap_mb == 5)),
                           **WINDOWS)
    ddp = DDP(make_wide_model(320))
    state, stepper, log = _tuned(ddp)
    steps = 120 if rank == 0 else 35
    rebuilds = Rebuilds()
    with ddp.join():
        train(ddp, rank, steps)
    return {"counted": stepper.steps, "switches": stepper.switches, "done": stepper.done, "rebuilds": rebuilds.close(),
            "buckets": [stepper.configs[ordinal].bucket_cap_mb for _, ordinal in stepper.switches]}


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
    # The job's own DDP ran without acspeed's hook: theirs went on its reducer itself.
    out["hook"] = first._get_ddp_logging_data().get("comm_hook")
    out["registered"] = state.registered
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
    log = StepLog(ddp, state)
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


def _train_with_checkpoint(ddp, rank: int, steps: int, at: int, folder: str) -> torch.Tensor:
    """train(), with a checkpoint at step `at` while tuning explores: the model's and the optimizer's
    state saved with torch.save and loaded back, and the DDP model deep-copied and pickled."""
    import copy
    import pickle
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    for step, (x, y) in enumerate(batches(rank, steps)):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        optimizer.step()
        if step == at:
            path = os.path.join(folder, f"checkpoint-{rank}.pt")
            torch.save({"model": ddp.module.state_dict(), "optimizer": optimizer.state_dict()}, path)
            saved = torch.load(path)
            ddp.module.load_state_dict(saved["model"])
            optimizer.load_state_dict(saved["optimizer"])
            copy.deepcopy(ddp), pickle.loads(pickle.dumps(ddp))
    return flat_params(ddp)


def frontends_with_online_on(rank: int, world_size: int, folder: str) -> dict:
    """DDP's paths as frontends use them (the behaviour scenarios' torch.compile of the DDP model, DDP
    around a compiled module, no_sync accumulation, a checkpoint mid-exploration), each tuned online
    while algorithm, streams and bucket size switch, against the same training with ACSPEED_ONLINE=0."""
    steps = 110
    paths = {
        "compile_ddp": (lambda: DDP(make_wide_model(320)), lambda ddp: torch.compile(ddp, backend="eager"),
                        lambda model: train(model, rank, steps)),
        "ddp_of_compiled": (lambda: DDP(torch.compile(make_wide_model(320), backend="aot_eager")), lambda ddp: ddp,
                            lambda model: train(model, rank, steps)),
        "no_sync": (lambda: DDP(make_wide_model(320)), lambda ddp: ddp,
                    lambda model: train(model, rank, steps, micro=3)),
        "checkpoint": (lambda: DDP(make_wide_model(320)), lambda ddp: ddp,
                       lambda model: _train_with_checkpoint(model, rank, steps, 30, folder)),
    }
    out = {}
    for name, (build, wrap, run) in paths.items():
        acspeed.online._started = False  # one tuned DDP model per path (test only)
        acspeed.online.testing(clock=lambda r, window, config: 0.1 / (1 + (config.algorithm == "reduce_scatter")
                                                                         + (config.streams == 2)
                                                                         + (config.bucket_cap_mb == 5)), **WINDOWS)
        with environment(ACSPEED_DB=os.path.join(folder, f"{name}.db")):  # before tuning stores a decision there
            with environment(ACSPEED_ONLINE="0"):
                off = build()
            assert acspeed._patch.state_of(off) is None
            reference = run(wrap(off))
            torch._dynamo.reset()
            tuned = build()
            stepper = acspeed._patch.state_of(tuned).stepper
            rebuilds = Rebuilds()
            result = run(wrap(tuned))
        out[name] = {"equal": torch.equal(reference, result), "done": stepper.done, "stopped": stepper.stopped,
                     "rebuilds": len(rebuilds.close()),
                     "knobs": sorted({(c.algorithm, c.streams, c.bucket_cap_mb or 25)
                                      for c in (stepper.configs[ordinal] for _, ordinal in stepper.switches)})}
        torch._dynamo.reset()
    return out


def reducer_cannot_be_rebuilt(rank: int, world_size: int) -> dict:
    """Where torch lacks the private API a rebuild needs (acspeed.reducer.unavailable says why), the
    bucket size is held and every window runs through acspeed's hook, the job's own DDP through its
    plain all-reduce; nothing is rebuilt and the start line says so."""
    acspeed.reducer.unavailable = lambda arguments: "torch 0.0 lacks DDP's private _ddp_init_helper (test)"
    acspeed.online.testing(clock=lambda r, window, config: 0.05 if config.streams == 2 else 0.1, **WINDOWS)
    lines = _listen()
    ddp = DDP(make_model())
    state, stepper, log = _tuned(ddp)
    rebuilds = Rebuilds()
    train(ddp, rank, 60)
    return {"windows": windows_as_run(stepper, log), "rebuilds": rebuilds.close(), "lines": lines.lines}
