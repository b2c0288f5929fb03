"""Online tuning inside the user's own job (docs/online.md): the step counter, the clocks and the
boundary protocol around the C++ driver (`_core.OnlineTuner`, tuner/include/acspeed/tuner/online.h),
which decides everything: the config of each window, the pairs, the discarded steps, "clearly
slower", the statistics and the verdict. This module only counts steps, times them, pushes the
times and switches configs where the driver says. Loaded at the first DDP model that is tuned.

When it runs: `offer` (rank 0, at the first DDP construction of the process) says whether this DDP
model is tuned: a job of >= 2 ranks, the DDP model's process group the whole world, and the lookup
found no decision (no store, no entry, a version mismatch); never over a stored decision (a stored
"keep DDP defaults" included), ACSPEED_CONFIG or an error unless ACSPEED_ONLINE=1; ACSPEED_ONLINE=0
turns it off; ACSPEED_DISABLE=1 always wins. One DDP model per process: a second one built later
keeps what the lookup gave it, and the line says so. Rank 0 builds the driver from the DDP
arguments the caller passed (by the knob rows' `ddp_argument`: a passed one is a pin) and the
ACSPEED_* pins; it broadcasts the payload (every point's config, the plans of windows 0 and 1,
the warm-up) with the lookup's decision, so every rank holds the same plan.

The protocol (every rank, in the DDP model's forward pre-hook; `Stepper.before_forward`):
  * A step is one synchronised backward of the tuned DDP model, counted as DDP counts its own: a
    forward with torch.is_grad_enabled() and require_backward_grad_sync, so `no_sync` micro-batches
    and evaluation forwards are not steps. A rank that has joined (DDP.join with uneven inputs) runs
    no forward: DDP's join hook shadows each forward of the others (its main_hook, wrapped while
    tuning runs), the protocol runs there, and the step is counted when the shadow synchronised
    (require_forward_param_sync, which main_hook sets): every rank counts the same steps.
  * The protocol runs at the first forward of each step (a step's later forwards, its no_sync
    micro-batches, pass). The first WARMUP_STEPS steps run the job's own DDP untimed. Then window k
    runs its plan's `steps` steps; a step's time on a rank is the interval between the first
    forwards of consecutive steps (the CPU's clock; on CUDA, events recorded on the current CUDA
    stream there, read at the window's boundary).
  * Window k's boundary is the first forward of the first step after it. There every rank waits
    for the previous boundary's collective (window k - 1's, issued a window ago: done by now), which
    brought window k + 1's config; switches to it (below); and issues window k's collective,
    asynchronously, on acspeed's own process group (created by every rank, in the same order, when
    tuning starts): an all-reduce MAX of a float64 vector holding this rank's step times of window k
    (padded) and three slots that rank 0 fills with its plan of window k + 2 while the others put -1.
    Rank 0 planned window k + 2 from the windows up to k - 1 (the driver's lookahead 2) and pushes
    window k's max times when the collective is waited for, at the next boundary. Nothing there
    blocks on another rank: a blocking collective in the forward pre-hook would deadlock under
    DDP.join (a joined rank reaches its join hook only after the others' forwards began DDP's own
    collectives), and no acspeed collective is left inside the comm hook but a new config's lanes.
  * A boundary whose next window is the decision issues no collective: from there the decision
    runs for good and the pre-hook leaves.

Switching (docs/online.md, "Switching"): a window whose config needs no comm hook (the runtime's
CommConfig.needs_comm_hook: the job's own DDP, a bucket size alone) runs DDP's own reducer without
any hook: DDP as the user built it. A window whose config needs one runs acspeed's hook. Between
two windows, in the forward pre-hook (a joined rank: its join hook), before the window's first
step: other buckets, or a hook to take away, rebuild the reducer (acspeed.reducer); a hook to add
alone is registered on the running reducer; between two hooked configs with the same buckets, the
hook takes the new config at the step's bucket 0 (HookState.replace_config, which builds new lanes
there, every rank in one order). Where torch lacks the private API a rebuild needs, the bucket size
is held and every window runs through acspeed's hook, the job's own DDP through its plain
all-reduce (the start line says so).

The end state is what `import acspeed` builds from the stored decision: its buckets, and acspeed's
hook only when the decision needs one. The decision is set up in the forward before the first step
it runs: a decision that needs no hook ("keep DDP defaults" among them) gets a reducer without any
hook, the hook state's lanes are released and the forward pre-hook removed, so no acspeed code is
left in the step path.
"""
import atexit
import functools
import json
import socket
import threading
import time
import weakref
from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist

from . import _log, _patch, _runtime, apply, decision, nccl, reducer, share_gpus
from .versions import job_versions

# Steps run untimed before the first window: DDP rebuilds its buckets after the first step, the
# caching allocator and data loaders warm up over the first few (docs/online.md, "Warm-up").
WARMUP_STEPS = 10

# Test-only seam (tests/python/test_online.py): set through `testing()`, never by a user.
_TEST: Dict[str, object] = {}

_started = False  # this process tuned a DDP model online already (one per process)

# DDP model -> its Stepper while the stepper may still rebuild its reducer (its forward pre-hook and,
# for a rank that has joined, DDP's join hook look it up here).
_STEPPERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_storing: set = set()  # rank 0's steppers whose decision is being written (kept alive for _at_exit)


def testing(clock: Optional[Callable[[int, int, object], float]] = None, warmup: Optional[int] = None,
            window_steps: Optional[int] = None, discard_steps: Optional[int] = None,
            max_windows: Optional[int] = None) -> None:
    """TEST-ONLY: `clock(rank, window, config)` replaces every measured step time (seconds); the
    others replace WARMUP_STEPS and the driver's window options. Every rank must call it alike,
    before the DDP model is built. testing() with no argument returns to the real clock."""
    _TEST.clear()
    _TEST.update({key: value for key, value in (("clock", clock), ("warmup", warmup), ("window_steps", window_steps),
                                                ("discard_steps", discard_steps), ("max_windows", max_windows))
                  if value is not None})


# --- the clocks ---------------------------------------------------------------------------------


class CpuClock:
    """Step times from the host's monotonic clock, read at each step's first forward."""

    def __init__(self):
        self._last: Optional[float] = None
        self._times: List[float] = []

    def mark(self, window: int, config) -> None:
        now = time.perf_counter()
        if self._last is not None:
            self._times.append(now - self._last)
        self._last = now

    def take(self) -> List[float]:
        """The step times since the last take (one per mark after the first)."""
        times, self._times = self._times, []
        return times


class CudaClock:
    """Step times from CUDA events recorded on the current CUDA stream at each step's first forward
    (after the previous step's work queued there: its backward's wait on the reduced buckets, the
    optimizer), read at the boundary: only then does the host wait, for the boundary's own event.
    `event` makes an event and `stream` names the current CUDA stream (seams for fakes in tests)."""

    def __init__(self, device: torch.device, event: Optional[Callable[[], object]] = None,
                 stream: Optional[Callable[[], object]] = None):
        self._event = event or (lambda: torch.cuda.Event(enable_timing=True))
        self._stream = stream or (lambda: torch.cuda.current_stream(device))
        self._events: List[object] = []

    def mark(self, window: int, config) -> None:
        event = self._event()
        event.record(self._stream())
        self._events.append(event)

    def take(self) -> List[float]:
        events = self._events
        if len(events) < 2:
            return []
        events[-1].synchronize()
        times = [start.elapsed_time(end) / 1000.0 for start, end in zip(events, events[1:])]
        self._events = [events[-1]]
        return times


class TestClock:
    """TEST-ONLY: a step of window k running `config` takes clock(rank, k, config) seconds."""

    def __init__(self, clock: Callable[[int, int, object], float], rank: int):
        self._clock, self._rank = clock, rank
        self._marks: List[Tuple[int, object]] = []

    def mark(self, window: int, config) -> None:
        self._marks.append((window, config))

    def take(self) -> List[float]:
        marks = self._marks
        times = [float(self._clock(self._rank, window, config)) for window, config in marks[:-1]]
        self._marks = marks[-1:]
        return times


def _clock(device: torch.device):
    if "clock" in _TEST:
        return TestClock(_TEST["clock"], dist.get_rank())
    return CudaClock(device) if device.type == "cuda" else CpuClock()


# --- when it runs -------------------------------------------------------------------------------


_NO_DECISION = ("no_store", "no_entry", "version_mismatch")


def wanted(source: str) -> bool:
    """Whether a lookup with this source is tuned online (ACSPEED_ONLINE: unset, 0 or 1; a bad value
    raises ValueError naming it)."""
    setting = _runtime.setting_string("ACSPEED_ONLINE")
    if source == "disabled" or setting == "0":
        return False
    return setting == "1" or source in _NO_DECISION


def offer(found, group, arguments: dict, device: torch.device):
    """Rank 0, after the lookup: adds to `found` (a decision.Decision) the payload every rank needs
    to tune this DDP model online, or a note why it is not tuned. Never raises: a problem is one
    warning and no online tuning."""
    try:
        if not wanted(found.source):
            return found
    except ValueError as error:
        found.warnings.append(f"{error}: online tuning off")
        return found
    world = dist.get_world_size()
    if group.size() < 2 or group.size() != world:
        if group.size() >= 2:
            found.warnings.append("not tuned online: this DDP model's process group is part of the job "
                                  "(online tuning needs every rank)")
        return found
    if _started:
        found.message += "; not tuned online: acspeed tunes the first DDP model of a process only"
        return found
    try:
        payload = _Plan.create(arguments, world, device)
    except (RuntimeError, ValueError, _runtime.RuntimeUnavailable) as error:
        found.warnings.append(f"online tuning could not start ({error})")
        return found
    if payload is None:
        found.message += f"; not tuned online: {_Plan.tuner.note}"
        _Plan.tuner = None
        return found
    found.online = payload
    return found


def _passed_ddp_arguments(arguments: dict) -> dict:
    """The DDP arguments the caller passed that a knob row names (a passed one is a pin)."""
    names = {knob.ddp_argument for knob in _runtime.core().KNOBS if knob.ddp_argument}
    return {name: arguments[name] for name in sorted(names) if arguments.get(name) is not None}


class _Plan:
    """Rank 0's driver, kept in this process while the payload travels to the others."""
    tuner = None

    @staticmethod
    def create(arguments: dict, world: int, device: torch.device) -> Optional[dict]:
        """The payload, or None when there is nothing to tune (the driver settled at once; its
        note says why; _Plan.tuner holds it)."""
        core = _runtime.core()
        options = {key: _TEST[key] for key in ("window_steps", "discard_steps", "max_windows") if key in _TEST}
        held = reducer.unavailable(arguments)
        warmup = int(_TEST.get("warmup", WARMUP_STEPS))
        tuner = core.OnlineTuner(json.dumps(_passed_ddp_arguments(arguments)), nnodes=core.node_count(world),
                                 gpu=device.type == "cuda", world_size=world, lookahead=2,
                                 rebuild_reducer=held is None, warmup_steps=warmup, **options)
        _Plan.tuner = tuner
        first = tuner.window(0)
        if first.settled:
            return None
        configs = json.loads(tuner.configs())
        baseline = next(i for i, item in enumerate(configs) if core.CommConfig.from_json(json.dumps(item))[0]
                        == tuner.baseline)
        return {"configs": configs, "plans": [_plan_row(first), _plan_row(tuner.window(1))],
                "warmup": warmup, "max_steps": tuner.max_exploration_steps,
                "window_steps_max": tuner.max_window_steps, "pinned": list(tuner.pinned), "baseline": baseline,
                "held": held}


def _plan_row(plan) -> list:
    return [int(plan.ordinal), int(plan.steps), bool(plan.settled)]


def start_line(payload: dict) -> str:
    pinned = "; held: " + ", ".join(payload["pinned"]) if payload["pinned"] else ""
    if payload["held"] and "switching it rebuilds DDP's reducer" in pinned:
        pinned += f": {payload['held']}"
    if payload["held"]:
        pinned += ("; the job's own DDP runs through acspeed's plain all-reduce hook while it tunes (running it "
                   "without the hook rebuilds DDP's reducer)")
    return (f"tuning this job's DDP communication online: at most {payload['warmup'] + payload['max_steps']} steps "
            f"({payload['warmup']} warm-up, then windows of the job's own DDP alternated with candidates), then it "
            f"keeps the fastest proven config{pinned}; ACSPEED_ONLINE=0 turns it off")


def runs_hooked(held: Optional[str], config) -> bool:
    """Whether a window of `config` runs acspeed's comm hook: when the config needs one (the
    runtime says), or always where the reducer cannot be rebuilt (`held` says why: the payload's)."""
    return held is not None or config.needs_comm_hook()


def baseline(payload: dict):
    """The config tuning starts from and compares with: the job's own DDP with the ACSPEED_* pins."""
    item = payload["configs"][payload["baseline"]]
    return _runtime.core().CommConfig.from_json(json.dumps(item))[0]


def begin(ddp, state, payload: dict, group, device: torch.device, parameters) -> "Stepper":
    """Every rank, after acspeed's hook state is built for `ddp` (registered only when the job's own
    DDP needs it; collective: acspeed's own group). `parameters`: DDP's constructor parameters (what
    a config's buckets are bound against)."""
    global _started
    _started = True
    tuner = _Plan.tuner if dist.get_rank() == 0 else None
    _Plan.tuner = None
    stepper = Stepper(payload, group, device, tuner)
    if tuner is not None:
        stepper.job = _Job(ddp, device)
        atexit.register(_at_exit, weakref.ref(stepper))
    stepper.state, stepper.parameters = state, parameters
    stepper.config = stepper.configs[stepper.baseline]
    stepper.buckets = stepper.buckets_of(stepper.config)
    stepper.gradient_bytes = sum(p.numel() * p.element_size() for p in ddp.module.parameters() if p.requires_grad)
    state.stepper = stepper
    _STEPPERS[ddp] = stepper
    stepper.pre_forward = ddp.register_forward_pre_hook(_before_forward)
    _patch_join_hook()
    return stepper


def _synchronised(ddp) -> bool:
    """Whether this forward of `ddp` is a step: DDP synchronises its backward (DDP's own test)."""
    return torch.is_grad_enabled() and ddp.require_backward_grad_sync


def _before_forward(module, args) -> None:
    """DDP's forward pre-hook while online tuning runs (Stepper.before_forward), then the step's
    count; a module-level function, so a copy or a pickle of the DDP model holds no acspeed state."""
    stepper = _STEPPERS.get(module)
    if stepper is not None:
        stepper.before_forward(module)
        if _synchronised(module):
            stepper.steps += 1


def _patch_join_hook() -> None:
    """A rank that has joined (DDP.join) runs no forward: DDP's join hook shadows each forward of
    the others once (main_hook): the protocol of that forward runs before it (the rebuild due there
    before the reducer's own bucket rebuild), and the step is counted when the shadow synchronised
    the backward (main_hook sets require_forward_param_sync to that). Idempotent; a DDP model that
    no stepper holds is untouched."""
    from torch.nn.parallel import distributed  # noqa: PLC0415 - loaded with torch
    join_hook = getattr(distributed, "_DDPJoinHook", None)
    if join_hook is None or hasattr(join_hook.main_hook, "_acspeed_original"):
        return
    original = join_hook.main_hook

    @functools.wraps(original)
    def main_hook(self):
        stepper = _STEPPERS.get(self.ddp)
        if stepper is not None:
            stepper.before_forward(self.ddp)
        original(self)
        if stepper is not None and self.ddp.require_forward_param_sync:
            stepper.steps += 1

    main_hook._acspeed_original = original
    join_hook.main_hook = main_hook


def _at_exit(ref) -> None:
    """Rank 0: a job that ends before settling says that it stored nothing; a decision still being
    written gets until the store's busy timeout."""
    stepper = ref()
    if stepper is None:
        return
    if not stepper.done:
        stepper.done = True
        _log.warn(f"online tuning did not settle before the job ended ({stepper.steps} steps, {max(stepper.window, 0)} "
                  f"window(s)): nothing was stored; a job of at least {stepper.warmup + stepper.max_steps} steps "
                  "settles")
    elif stepper.writer is not None:
        stepper.wait_stored()


class _Job:
    """Rank 0: what the stored decision is keyed by and described with (docs/online.md,
    "Remembered"). The precision and the batch come from the first forward of the DDP model."""

    def __init__(self, ddp, device: torch.device):
        module = ddp.module
        core = _runtime.core()
        world = dist.get_world_size()
        self.world, self.nnodes = world, core.node_count(world)
        self.signature = decision.model_signature(module)
        self.model_name = f"{type(module).__module__}.{type(module).__qualname__}"
        self.dtype = next((p.dtype for p in module.parameters() if p.is_floating_point()), torch.float32)
        self.device = device
        self.autocast: Optional[bool] = None
        self.batch = 0
        self._handle = ddp.register_forward_pre_hook(self._first_forward, with_kwargs=True)

    def _first_forward(self, module, args, kwargs):
        self._handle.remove()
        kind = self.device.type
        try:
            self.autocast = bool(torch.is_autocast_enabled(kind))  # torch >= 2.4
        except TypeError:
            self.autocast = bool(torch.is_autocast_cpu_enabled() if kind == "cpu" else torch.is_autocast_enabled())
        first = next((value for value in list(args) + list(kwargs.values()) if torch.is_tensor(value)), None)
        self.batch = int(first.shape[0]) if first is not None and first.dim() > 0 else 0

    def precision(self) -> str:
        """acspeed.configure / ACSPEED_PRECISION, else amp under autocast, else the parameters' dtype."""
        chosen = decision.precision()
        if chosen:
            return chosen
        if self.autocast:
            return "amp"
        return {torch.float16: "fp16", torch.bfloat16: "bf16"}.get(self.dtype, "fp32")

    def store(self, tuner) -> dict:
        core = _runtime.core()
        return core.store_online_session(
            tuner, "", decision.fingerprint()["instance_type"], self.signature, self.precision(), self.world,
            self.nnodes, share_gpus.job_shares_gpus(self.world, self.nnodes), self.model_name, self.batch,
            json.dumps(job_versions()))


# --- the step counter ---------------------------------------------------------------------------


class Stepper:
    """Counts steps and runs the boundary protocol in the DDP model's forward pre-hook (a joined
    rank: DDP's join hook; module docstring) and switches configs: the reducer, acspeed's hook on
    it or not, and the hook's config (HookState.stepper: at bucket 0)."""

    def __init__(self, payload: dict, group, device: torch.device, tuner=None):
        core = _runtime.core()
        self.configs = [core.CommConfig.from_json(json.dumps(item))[0] for item in payload["configs"]]
        self.plans: Dict[int, list] = dict(enumerate(payload["plans"]))  # window -> [ordinal, steps, settled]
        self.warmup = payload["warmup"]
        self.max_steps = payload["max_steps"]
        self.pad = payload["window_steps_max"]
        self.baseline = payload["baseline"]
        self.held = payload["held"]  # why the reducer cannot be rebuilt here, or None
        self.tuner = tuner  # rank 0 only
        self.device = device
        self.nccl = "nccl" in str(dist.get_backend(group))
        self.through = device if device.type == "cuda" and self.nccl else torch.device("cpu")
        ranks = sorted(dist.get_process_group_ranks(group))
        self.group = dist.new_group(ranks=ranks, backend=str(dist.get_backend(group)))
        self.clock = _clock(device)
        self.steps = 0          # synchronised steps so far (_before_forward and the join hook count them)
        self.started = -1       # the step whose first forward ran the protocol (before_forward)
        self.window = -1        # the window running (-1: warm-up)
        self.boundary = self.warmup  # the step that starts the next window
        self.switches: List[Tuple[int, int]] = []  # (step, ordinal) where a window's config took over
        self.done = False
        self.stopped: Optional[str] = None
        self.config = None      # the config running (begin: the job's own)
        self.pending: Optional[Tuple[int, int]] = None  # (step, ordinal) the hook takes at that step's bucket 0
        self.exchange: Optional[tuple] = None  # (window, vector, work): the boundary collective in flight
        self.job: Optional[_Job] = None  # rank 0
        self.writer: Optional[threading.Thread] = None  # rank 0: stores the decision off the training thread
        self.stored: Optional[dict] = None  # store_online_session's answer once written
        self.state = None       # the HookState (begin)
        self.parameters = None  # DDP's constructor parameters (begin)
        self.buckets: Optional[tuple] = None  # (bucket_cap_mb, bucket_cap_mb_list, first MiB) the reducer was built with
        self.pre_forward = None  # the forward pre-hook's handle while tuning runs
        self.gradient_bytes = 0  # the model's gradients, bytes (begin)

    def stop(self, why: str) -> None:
        """Tuning ends without a decision (the user's own comm hook took over, a config's lanes could
        not be built, ...)."""
        if not self.done:
            self.done, self.stopped = True, why
            _log.warn(f"online tuning stopped: {why}; nothing was stored", once=("online-stopped", id(self)))

    def buckets_of(self, config) -> tuple:
        """What `import acspeed` passes DDP for this config's buckets: (bucket_cap_mb,
        bucket_cap_mb_list, the first bucket's MiB or None), as acspeed.apply binds them."""
        arguments: dict = {}
        first = apply._set_knobs(arguments, self.parameters, config, [])
        return arguments.get("bucket_cap_mb"), arguments.get("bucket_cap_mb_list"), first

    def before_forward(self, ddp) -> None:
        """Every forward of the DDP model (a joined rank: each shadowed one), every rank alike, before
        DDP's own forward work. At a step's first forward: its clock mark; at a window's boundary, the
        protocol and the switch to the window's config; before the decision's first step, the
        decision for good. Once tuning has stopped: the job's own DDP again, and the pre-hook leaves."""
        if self.done:
            self._stopped(ddp)
            return
        step = self.steps
        if step == self.started:  # a later forward of the same step (no_sync micro-batches)
            return
        self.started = step
        if step < self.boundary:
            if self.window >= 0:
                self.clock.mark(self.window, self.config)
            return
        k = self.window
        if self.exchange is not None:
            self._receive()  # window k - 1's collective: window k + 1's plan
        ordinal, steps, settled = self.plans[k + 1]
        if settled:
            self._set_up_decision(ddp, ordinal)
            return
        self.clock.mark(k + 1, self.configs[ordinal])  # this step runs window k + 1's config
        if k >= 0:
            self._send(k)
        self.window = k + 1
        self.boundary = step + steps
        self._switch(ddp, step, ordinal)

    def _stopped(self, ddp) -> None:
        """The first forward after tuning stopped: the job's own buckets again; your comm hook stays
        where it took over, else the job's own DDP (no hook, lanes released) as at the end state."""
        own = self.configs[self.baseline]
        if self.stopped is not None:
            if self.state.user_hook is not None:  # acspeed's hook (a rebuilt reducer's) hands buckets to theirs
                if self.buckets_of(own) != self.buckets:
                    self._rebuild(ddp, own, hooked=True)
            else:
                self._end_state(ddp, self.baseline)
        self._finish(ddp)

    def _switch(self, ddp, step: int, ordinal: int) -> None:
        """A window's config takes over from this step (module docstring, "Switching")."""
        config = self.configs[ordinal]
        if config == self.config:
            return
        hooked = runs_hooked(self.held, config)
        self._rebuild(ddp, config, hooked)
        if hooked and config != self.state.config:
            self.pending = (step, ordinal)  # at this step's bucket 0 (at_bucket_zero)
            return
        self._ran(step, ordinal)

    def at_bucket_zero(self, state) -> None:
        """acspeed's hook, bucket 0 of a step (HookState.stepper): a hooked config due from this step
        takes over before the step's first bucket is reduced; new lanes are built here, by every
        rank in one order (a collective)."""
        if self.pending is not None:
            (step, ordinal), self.pending = self.pending, None
            self._replace(state, step, ordinal)

    def _replace(self, state, step: int, ordinal: int) -> None:
        config = self.configs[ordinal]
        if config != state.config:
            try:
                state.replace_config(config)  # every rank raises alike (the lanes' agreement): every rank stops
            except (RuntimeError, ValueError) as error:
                if _runtime.strict_or_off():
                    raise RuntimeError(f"acspeed (ACSPEED_STRICT=1): online tuning could not switch to "
                                       f"{config.describe()} ({error})") from error
                self.stop(f"{config.describe()} could not be set up ({error}); the job's own DDP runs on")
                return
        self._ran(step, ordinal)

    def _ran(self, step: int, ordinal: int) -> None:
        """The window's config runs from `step` (its NCCL rules too)."""
        config = self.configs[ordinal]
        if config == self.config:
            return
        self.config = config
        if self.nccl:
            nccl.publish_rules(config.to_json())
        self.switches.append((step, ordinal))

    def _rebuild(self, ddp, config, hooked: bool, exact: bool = False) -> None:
        """The reducer with the config's buckets (acspeed.reducer), with acspeed's hook (`hooked`) or
        none. Other buckets, or a hook to take away, need a new reducer; a hook to add alone is
        registered on the running one. Nothing when both cut the gradients into the same single
        bucket (unless `exact`: the end state): a rebuild would cost a step its overlap and DDP's
        runtime logging its statistics for nothing."""
        buckets = self.buckets_of(config)
        same = buckets == self.buckets or (not exact and self._one_bucket(ddp, buckets)
                                           and self._one_bucket(ddp, self.buckets))
        registered = self.state.registered
        if same and hooked == registered:
            return
        if not same or registered:
            cap, caps, first = buckets
            with apply._first_bucket(first):
                reducer.rebuild(ddp, cap, caps)
            self.buckets = buckets
            self.state.registered = False
        if hooked:
            _patch.register_hook(ddp, self.state)
            if self.state.user_hook is not None:  # acspeed's hook hands every bucket to theirs
                ddp.logger._set_comm_hook_name(getattr(self.state.user_hook[0], "__qualname__", "user hook"))

    def _one_bucket(self, ddp, buckets: tuple) -> bool:
        """Whether every gradient fits the smallest bucket these arguments give (one bucket)."""
        cap, caps, first = buckets
        with apply._first_bucket(first):
            return self.gradient_bytes < reducer.smallest_cap(ddp, cap, caps)

    def _set_up_decision(self, ddp, ordinal: int) -> None:
        """The forward before the decision's first step: what `import acspeed` builds from it."""
        self.window += 1
        self._end_state(ddp, ordinal)
        if not self.done:
            self._settle(self.state)
        self._finish(ddp)

    def _end_state(self, ddp, ordinal: int) -> None:
        """`ordinal` runs for good from this step: its buckets (exactly those a DDP built from it has),
        acspeed's hook only if it needs one (held: the reducer cannot lose the hook), else no hook,
        the lanes released and the state forgotten."""
        config, state = self.configs[ordinal], self.state
        state.stepper, self.pending = None, None
        if runs_hooked(self.held, config):
            self._rebuild(ddp, config, hooked=True, exact=True)
            self._replace(state, self.steps, ordinal)  # local: its lanes were built when it ran in a window
            return
        self._rebuild(ddp, config, hooked=False, exact=True)
        state.close()
        _patch.forget(ddp)
        self._ran(self.steps, ordinal)

    def _finish(self, ddp) -> None:
        """Tuning needs no forward any more: the pre-hook leaves the DDP model."""
        _STEPPERS.pop(ddp, None)
        if self.pre_forward is not None:
            self.pre_forward.remove()
            self.pre_forward = None

    def _send(self, k: int) -> None:
        """Issues window k's boundary collective (asynchronous; waited for at the next boundary):
        this rank's step times of window k, and rank 0's plan of window k + 2 (MAX over ranks)."""
        times = self.clock.take()
        steps = self.plans[k][1]
        if len(times) != steps:
            raise RuntimeError(f"acspeed online tuning: window {k} timed {len(times)} steps, its plan ran {steps}")
        vector = torch.full((self.pad + 3,), -1.0, dtype=torch.float64)
        vector[:steps] = torch.tensor(times, dtype=torch.float64)
        if self.tuner is not None:
            vector[self.pad:] = torch.tensor(self._plan_ahead(k + 2), dtype=torch.float64)
        vector = vector.to(self.through)
        work = dist.all_reduce(vector, op=dist.ReduceOp.MAX, group=self.group, async_op=True)
        self.exchange = (k, vector, work)

    def _receive(self) -> None:
        """Waits for window k's collective (every rank issued it a window ago): the plan of window
        k + 2 on every rank; rank 0 pushes window k's max times."""
        (k, vector, work), self.exchange = self.exchange, None
        work.wait()
        values = vector.cpu().tolist()
        ordinal, flag, ahead = (int(value) for value in values[self.pad:])
        if ordinal < 0:
            raise RuntimeError(f"acspeed online tuning: rank 0 sent no plan for window {k + 2}")
        self.plans[k + 2] = [ordinal, ahead, flag != 0]
        if self.tuner is not None:
            try:
                self.tuner.push(k, values[:self.plans[k][1]])
            except (RuntimeError, ValueError) as error:
                self._abandon(f"window {k}'s times were refused: {error}")

    def _plan_ahead(self, k: int) -> list:
        """Rank 0: [ordinal, flag, steps] of window k; flag 1: the decision; 2: tuning abandoned,
        the job's own config for good (after a problem of the driver's, warned about)."""
        if self.tuner is not None:
            try:
                plan = self.tuner.window(k)
                return [plan.ordinal, 1 if plan.settled else 0, plan.steps]
            except (RuntimeError, ValueError) as error:
                self._abandon(f"window {k} could not be planned: {error}")
        return [self.baseline, 2, 0]

    def _abandon(self, why: str) -> None:
        _log.warn(f"online tuning abandoned ({why}): the job's own DDP config runs on; nothing is stored",
                  once=("online-abandoned", id(self)))
        self.tuner = None

    def _settle(self, state) -> None:
        self.done = True
        state.stepper = None
        tuner = self.tuner
        if tuner is None or not tuner.settled:  # abandoned: rank 0 warned already
            return
        kept = tuner.decision == tuner.baseline  # the verdict's speedup, if any, is the rejected candidate's
        speedup = (f" ({tuner.note})" if kept or tuner.speedup is None else
                   f" ({tuner.speedup:.3f}x the job's own DDP, 95% interval [{tuner.ci_low:.3f}, {tuner.ci_high:.3f}])")
        line = f"online tuning settled after {self.steps} steps on {tuner.decision.describe()}{speedup}"
        if self.held and not tuner.decision.needs_comm_hook():
            line += (f" (acspeed's plain all-reduce hook stays in this job's step path: removing it rebuilds DDP's "
                     f"reducer, and {self.held}; the next run builds DDP without it)")
        _storing.add(self)
        self.writer = threading.Thread(target=self._store, args=(line,), name="acspeed-online-store", daemon=True)
        self.writer.start()

    def _store(self, line: str) -> None:
        """The writer thread: stores the session and decision, then says the settle line (one line
        either way: a failed write is a warning, never an error of the job)."""
        try:
            self._write(line)
        finally:
            _storing.discard(self)

    def _write(self, line: str) -> None:
        host = socket.gethostname()
        try:
            self.stored = self.job.store(self.tuner)
        except (RuntimeError, ValueError, _runtime.RuntimeUnavailable) as error:
            _log.warn(f"{line}; it could not be stored on {host} ({error}): the next run tunes again")
            return
        stored = self.stored
        where = f"as decision #{stored['decision_id']} (online session #{stored['session_id']}) in {stored['store']} on {host}"
        if not stored["active"]:
            where += (f", inactive: {stored['inactive_because']} (`acspeed-tune configs activate "
                      f"{stored['decision_id']}` would apply it)")
        _log.info(f"{line}; stored {where}")

    def wait_stored(self, timeout_s: Optional[float] = None) -> Optional[dict]:
        """Rank 0: waits for the decision's write (by default the store's busy timeout and 5 s);
        its answer, or None (not written: warned)."""
        if self.writer is None:
            return None
        if timeout_s is None:
            timeout_s = int(_runtime.setting_string("ACSPEED_BUSY_TIMEOUT_MS")) / 1000.0 + 5.0
        self.writer.join(timeout_s)
        if self.writer.is_alive():
            _log.warn(f"online tuning's decision was still being written after {timeout_s:g} s: not stored",
                      once=("online-slow-store", id(self)))
        return self.stored
