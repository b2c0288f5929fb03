"""Worker-side scenarios for the DDP tests (run inside ddp_harness ranks). Each returns plain data
that the test asserts on; many configurations run inside one set of worker processes."""
import contextlib
import inspect
import json
import logging
import os
import threading
import time

import torch
import torch._dynamo
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

import acspeed
import acspeed.apply
import acspeed._patch
import acspeed.engine.state
import acspeed.engine.issue
import acspeed.engine.lanes
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 3


def make_model(seed: int = 0) -> torch.nn.Module:
    """Eight layers (16 parameter tensors, ~9k elements): a 0.001 MiB bucket cap gives one bucket per tensor."""
    torch.manual_seed(seed)
    layers = [torch.nn.Linear(24, 40), torch.nn.Tanh()]
    for _ in range(6):
        layers += [torch.nn.Linear(40, 40), torch.nn.Tanh()]
    layers.append(torch.nn.Linear(40, 5))
    return torch.nn.Sequential(*layers)


def batches(rank: int, count: int):
    generator = torch.Generator().manual_seed(1000 + rank)
    return [(torch.randn(16, 24, generator=generator), torch.randn(16, 5, generator=generator))
            for _ in range(count)]


def flat_params(module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in module.parameters()])


def train(ddp, rank: int, steps: int = STEPS, micro: int = 1, stop_when=None) -> torch.Tensor:
    """SGD with momentum; `micro` > 1 accumulates micro-batches under no_sync before the synced one;
    `stop_when()` true after a step ends the training there."""
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    data = batches(rank, steps * micro)
    for step in range(steps):
        optimizer.zero_grad()
        for index in range(micro):
            x, y = data[step * micro + index]
            context = ddp.no_sync() if index < micro - 1 else contextlib.nullcontext()
            with context:
                torch.nn.functional.mse_loss(ddp(x), y).backward()
        optimizer.step()
        if stop_when is not None and stop_when():
            break
    return flat_params(ddp)


@contextlib.contextmanager
def environment(**values):
    saved = {name: os.environ.get(name) for name in values}
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = str(value)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def plain_ddp(module, **kwargs):
    """DDP exactly as torch builds it (acspeed off)."""
    with environment(ACSPEED_DISABLE="1"):
        return DDP(module, **kwargs)


class Captured(logging.Handler):
    """acspeed's log lines in this process."""

    def __init__(self):
        super().__init__()
        self.lines = []
        logging.getLogger("acspeed").addHandler(self)

    def emit(self, record):
        self.lines.append((record.levelname, record.getMessage()))

    def take(self):
        lines, self.lines = self.lines, []
        return lines


def acspeed_against_plain(rank: int, world_size: int) -> dict:
    """DDP as `import acspeed` builds it (whatever the lookup finds) against plain DDP on the same
    data: whether acspeed's hook runs, the bucket cap, equal parameters after training, and what
    acspeed logged while building it."""
    captured = Captured()
    base = train(plain_ddp(make_model()), rank)
    captured.take()
    ddp = DDP(make_model())
    return {"hook": acspeed._patch.state_of(ddp) is not None, "cap": ddp.bucket_bytes_cap,
            "equal": bool((train(ddp, rank) == base).all()), "log": captured.take()}


def config(**fields) -> str:
    return json.dumps({"version": 1, **fields})


def compare(result: torch.Tensor, base: torch.Tensor, start: torch.Tensor) -> dict:
    diff = (result - base).abs().max().item()
    return {"identical": bool(torch.equal(result, base)), "max_abs": diff,
            "rel_to_params": diff / base.abs().max().item(),
            "rel_to_update": diff / (base - start).abs().max().item(),
            "finite": bool(torch.isfinite(result).all())}


class _NoNative:
    """Makes torch.distributed's `ops` (names of its functions) unavailable, as in a backend
    without them."""

    def __init__(self, ops):
        self.ops = tuple(ops)

    def __enter__(self):
        self.saved = {op: getattr(dist, op) for op in self.ops}

        def missing(*args, **kwargs):
            raise NotImplementedError("not in this backend (test)")
        for op in self.ops:
            setattr(dist, op, missing)

    def __exit__(self, *exc):
        for op, function in self.saved.items():
            setattr(dist, op, function)


def stock_hook_ddp(module, hook, **kwargs):
    """DDP with one of torch's own comm hooks (the reference for acspeed's compressed hook)."""
    ddp = plain_ddp(module, **kwargs)
    ddp.register_comm_hook(None, hook)
    return ddp


STOCK_HOOKS = {"fp16": default_hooks.fp16_compress_hook, "bf16": default_hooks.bf16_compress_hook}


class _CountedSleeps:
    """Stands in for issue.py's `time` module while a combo runs: counts the sleeps of the test seam
    (HookState.test_delays), so a test can tell that the delay it asked for really happened."""

    def __init__(self):
        self.calls = 0
        self.saved = None

    def sleep(self, seconds: float) -> None:
        self.calls += 1
        time.sleep(seconds)

    def __enter__(self):
        self.saved, acspeed.engine.issue.time = acspeed.engine.issue.time, self
        return self

    def __exit__(self, *exc):
        acspeed.engine.issue.time = self.saved


def equivalence(rank: int, world_size: int, combos: list) -> dict:
    """combos: [{name, config, env?, missing?, delays?}]; an env value may be {rank: value};
    missing: torch.distributed collectives made unavailable (_NoNative);
    delays: {rank: {lane: seconds}} slept before each collective of that lane on that rank (the
    test-only seam). Each combo trains STEPS steps from the same start as plain DDP and reports how
    far its parameters end up from plain DDP's and, when it compresses, from torch's compress hook's.
    Runs with ACSPEED_STRICT=1: a bucket out of order is an error."""
    captured = Captured()
    start = flat_params(make_model())
    base = train(plain_ddp(make_model()), rank)
    stock = {name: train(stock_hook_ddp(make_model(), hook), rank) for name, hook in STOCK_HOOKS.items()}
    out = {}
    for combo in combos:
        name, text = combo["name"], combo["config"]
        env = {key: (value[rank] if isinstance(value, dict) else value) for key, value in combo.get("env", {}).items()}
        with environment(ACSPEED_STRICT="1", **env), _NoNative(combo.get("missing", ())), \
                _CountedSleeps() as sleeps:
            ddp = acspeed.apply.wrap(make_model(), text)
            state = acspeed._patch.state_of(ddp)
            if state is not None:
                state.test_delays = combo.get("delays", {}).get(rank, {})
            result = train(ddp, rank)
        out[name] = compare(result, base, start)
        out[name]["delayed_collectives"] = sleeps.calls
        compression = json.loads(text).get("compression", "none")
        if compression in stock:
            against_stock = compare(result, stock[compression], start)
            out[name]["stock_identical"] = against_stock["identical"]
            out[name]["stock_rel_to_update"] = against_stock["rel_to_update"]
        out[name]["hook"] = state is not None
        out[name]["nonfinite_fallbacks"] = state.nonfinite_fallbacks if state else 0
        out[name]["left_to_finish"] = state.left_to_finish if state else 0
        out[name]["emulated"] = state.collectives.emulated() if state else []
        out[name]["by_all_to_all"] = state.collectives.scatters_by_all_to_all(torch.float32) if state else False
        del ddp
    out["_log"] = captured.take()
    return out


HOOK_CONFIG = config(algorithm="reduce_scatter", streams=2, bucket_cap_mb=0.001)
_MIB = 1024 * 1024


def _write(folder: str, name: str, text: str) -> str:
    path = os.path.join(folder, name)
    with open(path, "w") as out:
        out.write(text)
    return path


class CountingObserver:
    def __init__(self):
        self.launched, self.completed, self.nbytes = [], [], 0

    def bucket_launched(self, index, nbytes):
        self.launched.append(index)
        self.nbytes += nbytes

    def bucket_completed(self, index):
        self.completed.append(index)


def behaviours(rank: int, world_size: int, folder: str) -> dict:
    """One launch, many behaviours of `import acspeed` inside a job (ACSPEED_CONFIG forces configs)."""
    captured = Captured()
    out = {}
    start = flat_params(make_model())
    base = train(plain_ddp(make_model()), rank)
    captured.take()
    hook_file = _write(folder, "hook.json", HOOK_CONFIG)
    knobs_file = _write(folder, "knobs.json", config(bucket_cap_mb=0.5, first_bucket_mb=0.25,
                                                      gradient_as_bucket_view=True, algorithm="reduce_scatter"))

    with environment(ACSPEED_DISABLE="1", ACSPEED_CONFIG=hook_file):
        ddp = DDP(make_model())
        out["disabled"] = {"hook": acspeed._patch.state_of(ddp) is not None, "cap": ddp.bucket_bytes_cap,
                           "equal": torch.equal(train(ddp, rank), base), "log": captured.take()}

    with environment(ACSPEED_CONFIG=knobs_file):
        ddp = DDP(make_model())
        bucket_config = getattr(ddp, "_bucket_config", None)
        out["config_applied"] = {
            "hook": acspeed._patch.state_of(ddp) is not None, "cap": ddp.bucket_bytes_cap,
            "first": (bucket_config.per_bucket_bytes_caps or (bucket_config.first_bucket_bytes_cap,))[0]
            if bucket_config else None,
            "view": ddp.gradient_as_bucket_view, "equal": torch.equal(train(ddp, rank), base),
            "log": captured.take()}
        ddp = DDP(make_model(), bucket_cap_mb=2, gradient_as_bucket_view=False)
        out["explicit_wins"] = {"cap": ddp.bucket_bytes_cap, "view": ddp.gradient_as_bucket_view,
                                "equal": torch.equal(train(ddp, rank), base), "log": captured.take()}

    with environment(ACSPEED_CONFIG=hook_file):
        # The user's own hook wins over acspeed's.
        calls = []

        def user_hook(state, bucket):
            calls.append(bucket.index())
            return default_hooks.allreduce_hook(state, bucket)
        ddp = DDP(make_model())
        acspeed_state = acspeed._patch.state_of(ddp)
        ddp.register_comm_hook(None, user_hook)
        result = train(ddp, rank)
        out["user_hook"] = {"calls": len(calls), "lanes": len(acspeed_state.lanes),
                            "equal": torch.equal(result, base), "log": captured.take()}

        # A built-in hook registered after acspeed's wins the same way.
        ddp = DDP(make_model())
        ddp._register_builtin_comm_hook(dist.BuiltinCommHookType.ALLREDUCE)
        out["builtin_hook"] = {"lanes": len(acspeed._patch.state_of(ddp).lanes),
                               "equal": torch.equal(train(ddp, rank), base), "log": captured.take()}

        # Observer sees every bucket launched and completed.
        ddp = DDP(make_model())
        observer = CountingObserver()
        acspeed._patch.attach_observer(ddp, observer)
        result = train(ddp, rank, steps=2)  # DDP's first step uses one bucket, later ones the rebuilt buckets
        out["observer"] = {"launched": sorted(observer.launched), "completed": sorted(observer.completed),
                           "nbytes": observer.nbytes, "param_bytes": start.numel() * start.element_size()}

    # torch.compile: DDPOptimizer keeps DDP's reducer, so the hook runs. (It refuses buckets smaller
    # than torch's 1 MiB first bucket, with or without acspeed, hence this config's 1 MiB.)
    with environment(ACSPEED_CONFIG=_write(folder, "compile.json",
                                           config(algorithm="reduce_scatter", streams=2, bucket_cap_mb=1))):
        ddp = DDP(make_model())
        observer = CountingObserver()
        acspeed._patch.attach_observer(ddp, observer)
        compiled = torch.compile(ddp, backend="eager")
        result = train(compiled, rank)
        out["compile"] = {"equal": torch.equal(result, base), "buckets_seen": len(observer.launched)}
        captured.take()

        # Compiled autograd's python reducer bypasses comm hooks: acspeed steps aside and says so.

        saved = torch._dynamo.config.optimize_ddp
        torch._dynamo.config.optimize_ddp = "python_reducer"
        try:
            ddp = DDP(make_model())
            out["python_reducer"] = {"hook": acspeed._patch.state_of(ddp) is not None, "log": captured.take()}
        finally:
            torch._dynamo.config.optimize_ddp = saved
        del ddp, compiled

    # Bad input: one warning on rank 0, DDP defaults, training runs; ACSPEED_STRICT=1 raises everywhere
    # (a SystemExit: no traceback), rank 0 saying so in one line.
    bad = {
        "missing_file": {"ACSPEED_CONFIG": os.path.join(folder, "absent.json")},
        "not_json": {"ACSPEED_CONFIG": _write(folder, "bad.json", "{algorithm: ")},
        "unknown_algorithm": {"ACSPEED_CONFIG": _write(folder, "algo.json", config(algorithm="ring"))},
        "streams_0": {"ACSPEED_CONFIG": _write(folder, "streams.json", config(streams=0))},
        "bucket_negative": {"ACSPEED_CONFIG": _write(folder, "bucket.json", config(bucket_cap_mb=-1))},
        "bucket_zero": {"ACSPEED_CONFIG": _write(folder, "zero.json", config(bucket_cap_mb=0))},
        "pin_streams_abc": {"ACSPEED_STREAMS": "abc"},
        "pin_algorithm_ring": {"ACSPEED_ALGORITHM": "ring"},
        "disable_maybe": {"ACSPEED_DISABLE": "maybe"},
        "nnodes_two": {"NNODES": "two"},  # the lookup key's node count: counted by the runtime's rule
    }
    for name, env in bad.items():
        with environment(**env):
            ddp = DDP(make_model())
            result = {"hook": acspeed._patch.state_of(ddp) is not None, "cap": ddp.bucket_bytes_cap,
                      "equal": torch.equal(train(ddp, rank), base), "log": captured.take()}
            with environment(ACSPEED_STRICT="1"):
                try:
                    DDP(make_model())
                    result["strict"] = "no error"
                except acspeed._log.StrictError as error:
                    result["strict"] = str(error)
            result["strict_log"] = captured.take()
        out[f"bad/{name}"] = result

    # DDP allowed to skip the buckets of unused parameters: acspeed's hook steps aside.
    if "skip_all_reduce_unused_params" in inspect.signature(DDP.__init__._acspeed_original).parameters:
        with environment(ACSPEED_CONFIG=hook_file):
            ddp = DDP(PartlyUsed(), find_unused_parameters=True, skip_all_reduce_unused_params=True)
            torch.nn.functional.mse_loss(ddp(torch.randn(4, 24)), torch.zeros(4, 5)).backward()
            out["skip_unused"] = {"hook": acspeed._patch.state_of(ddp) is not None, "log": captured.take()}

    # Sparse gradients: acspeed's hook steps aside, training runs.
    class SparseModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.embedding = torch.nn.Embedding(50, 24, sparse=True)
            self.head = torch.nn.Linear(24, 5)

        def forward(self, ids):
            return self.head(self.embedding(ids).mean(1))
    with environment(ACSPEED_CONFIG=hook_file):
        ddp = DDP(SparseModel())
        torch.nn.functional.mse_loss(ddp(torch.randint(0, 50, (4, 3))), torch.zeros(4, 5)).backward()
        out["sparse"] = {"hook": acspeed._patch.state_of(ddp) is not None, "log": captured.take()}

    # No compiled runtime (a broken install): one warning, DDP defaults, training runs.
    from acspeed import _runtime  # noqa: PLC0415
    saved_core = _runtime.core

    def missing_core():
        raise _runtime.RuntimeUnavailable("acspeed's C++ runtime (acspeed._core) is not built (test)")
    _runtime.core = missing_core
    try:
        with environment(ACSPEED_CONFIG=hook_file):
            ddp = DDP(make_model())
            out["no_runtime"] = {"hook": acspeed._patch.state_of(ddp) is not None,
                                 "equal": torch.equal(train(ddp, rank), base), "log": captured.take()}
    finally:
        _runtime.core = saved_core

    # Unknown keys are warned about, and the config still applies.
    with environment(ACSPEED_CONFIG=_write(folder, "extra.json", config(bucket_cap_mb=0.5, colour="blue"))):
        ddp = DDP(make_model())
        out["unknown_key"] = {"cap": ddp.bucket_bytes_cap, "log": captured.take()}

    # Re-wrapping inside live workers releases the previous trial's lanes and process groups.
    from torch.distributed import distributed_c10d  # noqa: PLC0415
    module = make_model()
    states, groups = [], []
    for _ in range(4):
        ddp = acspeed.apply.wrap(module, config(algorithm="hierarchical", streams=3))
        states.append(acspeed._patch.state_of(ddp))
        groups.append([group for lane in states[-1].lanes for group in lane.groups()])
        train(ddp, rank, steps=1)
    alive = distributed_c10d._world.pg_map
    out["rewrap"] = {"groups_per_wrap": [len(g) for g in groups],
                     "groups_alive": [sum(group in alive for group in g) for g in groups],
                     "released": [len(state.lanes) == 0 for state in states],
                     "acspeed_threads": [t.name for t in threading.enumerate() if "acspeed" in t.name]}
    ddp = acspeed.apply.wrap(module, config())
    out["rewrap"]["default_has_hook"] = acspeed._patch.state_of(ddp) is not None
    out["rewrap"]["last_released"] = len(states[-1].lanes) == 0
    return out


def _grads_after_one_step(ddp, rank: int, value: float) -> torch.Tensor:
    """One backward with element [0, 0] of the first layer's gradient set to `value` on rank 1."""
    first = next(ddp.module.parameters())
    if rank == 1:
        def inject(grad):
            grad = grad.clone()
            grad[0, 0] = value
            return grad
        first.register_hook(inject)
    x, y = batches(rank, 1)[0]
    torch.nn.functional.mse_loss(ddp(x), y).backward()
    return torch.cat([p.grad.flatten() for p in ddp.module.parameters()])


def nonfinite_fallback(rank: int, world_size: int) -> dict:
    """fp16 compression meets a gradient fp16 cannot hold (1e6 > 65504), then a true Inf; bf16
    compression (fp32's exponent range: no check) meets a true Inf. The value is in the first layer's
    gradient, so in the step's last bucket; "overflow_left" slows rank 1's collectives (the test-only
    seam), so that rank 0's last hook call finds that bucket in flight and leaves it, re-send included,
    to its own finish."""
    captured = Captured()
    out = {}
    for name, value, compression in (("overflow", 1e6, "fp16"), ("inf", float("inf"), "fp16"),
                                      ("bf16_inf", float("inf"), "bf16"), ("overflow_left", 1e6, "fp16")):
        base = _grads_after_one_step(plain_ddp(make_model()), rank, value)
        ddp = acspeed.apply.wrap(make_model(), config(compression=compression, bucket_cap_mb=0.001))
        state = acspeed._patch.state_of(ddp)
        if name == "overflow_left" and rank == 1:
            state.test_delays = {0: 0.02}
        grads = _grads_after_one_step(ddp, rank, value)
        first_numel = next(ddp.module.parameters()).numel()
        finite = torch.isfinite(base)
        out[name] = {
            "fallbacks": state.nonfinite_fallbacks,
            "left_to_finish": state.left_to_finish,
            # The bucket holding the injected value was reduced uncompressed: exactly DDP's numbers.
            "injected_bucket_equal": torch.equal(grads[:first_numel], base[:first_numel]),
            "same_nonfinite": torch.equal(torch.isfinite(grads), finite),
            "rest_max_rel": ((grads - base)[finite].abs().max() / base[finite].abs().max()).item(),
            "log": captured.take(),
        }
    return out


def make_other_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(24, 8), torch.nn.Tanh(), torch.nn.Linear(8, 5))


def store_lookup(rank: int, world_size: int) -> dict:
    """`import acspeed` against a real store (ACSPEED_DB), decisions imported by acspeed-tune. Rank 1
    points at no store at all: what it applies can only come from rank 0's broadcast."""
    captured = Captured()
    if rank == 1:
        os.environ["ACSPEED_DB"] = os.path.join(os.path.dirname(os.environ["ACSPEED_DB"]), "absent", "none.db")
    out = {}
    for name, env, factory in (("exact", {"ACSPEED_PRECISION": "amp"}, make_model),
                               ("other_precision", {"ACSPEED_PRECISION": "bf16"}, make_model),
                               ("other_instance", {"ACSPEED_PRECISION": "amp", "ACSPEED_INSTANCE_TYPE": "other-box"},
                                make_model),
                               ("version_mismatch", {"ACSPEED_PRECISION": "amp"}, make_other_model)):
        with environment(**env):
            ddp = DDP(factory())
            state = acspeed._patch.state_of(ddp)
            out[name] = {"hook": state is not None, "cap": ddp.bucket_bytes_cap,
                         "streams": len(state.lanes) if state else 0, "log": captured.take()}
            train(ddp, rank, steps=2)
    # acspeed.configure(precision=...) takes precedence over ACSPEED_PRECISION.
    acspeed.configure(precision="bf16")
    try:
        with environment(ACSPEED_PRECISION="amp"):
            DDP(make_model())
            out["configured_precision"] = {"log": captured.take()}
    finally:
        acspeed.configure(precision=None)
    return out


class PartlyUsed(torch.nn.Module):
    """make_model() plus a layer the forward pass never uses (find_unused_parameters, static_graph)."""

    def __init__(self):
        super().__init__()
        self.body = make_model()
        self.unused = torch.nn.Linear(24, 3)

    def forward(self, x):
        return self.body(x)


def train_pair(first, second, rank: int) -> torch.Tensor:
    """Two DDP models reduced in the same backward pass."""
    optimizer = torch.optim.SGD(list(first.parameters()) + list(second.parameters()), lr=0.05)
    for x, y in batches(rank, STEPS):
        optimizer.zero_grad()
        (torch.nn.functional.mse_loss(first(x), y) + torch.nn.functional.mse_loss(second(x), y)).backward()
        optimizer.step()
    return torch.cat([flat_params(first), flat_params(second)])


VARIANTS = {  # name -> (model factory, DDP arguments, micro-batches per step)
    "no_sync": (make_model, {}, 2),
    "find_unused": (PartlyUsed, {"find_unused_parameters": True}, 1),
    "static_graph": (make_model, {"static_graph": True}, 1),
    "static_graph_unused": (PartlyUsed, {"static_graph": True}, 1),  # DDP delays the first step's buckets
    "gradient_as_bucket_view": (make_model, {"gradient_as_bucket_view": True}, 1),
}


def variants(rank: int, world_size: int, configs: dict) -> dict:
    """Each config x each DDP variant (and two DDP models in one backward) against the same
    variant of plain DDP (or of torch's compress hook, for a compressing config). Strict."""
    out = {}
    for config_name, text in configs.items():
        compression = json.loads(text).get("compression", "none")

        def reference(module, **kwargs):
            if compression == "none":
                return plain_ddp(module, **kwargs)
            return stock_hook_ddp(module, STOCK_HOOKS[compression], **kwargs)
        with environment(ACSPEED_STRICT="1"):
            for name, (factory, kwargs, micro) in VARIANTS.items():
                base = train(reference(factory(), **kwargs), rank, micro=micro)
                ddp = acspeed.apply.wrap(factory(), text, **kwargs)
                out[f"{config_name}/{name}"] = {"hook": acspeed._patch.state_of(ddp) is not None,
                                                "equal": torch.equal(train(ddp, rank, micro=micro), base)}
                del ddp
            pair_base = train_pair(reference(make_model(1)), reference(make_model(2)), rank)
            first, second = acspeed.apply.wrap(make_model(1), text), acspeed.apply.wrap(make_model(2), text)
            out[f"{config_name}/two_instances"] = {
                "hook": None not in (acspeed._patch.state_of(first), acspeed._patch.state_of(second)),
                "equal": torch.equal(train_pair(first, second, rank), pair_base)}
            del first, second
    return out


class FakeBucket:
    """What DDP hands a comm hook, for driving the hook by hand."""

    def __init__(self, index: int, tensor: torch.Tensor, last: bool):
        self._index, self._tensor, self._last = index, tensor, last

    def index(self):
        return self._index

    def buffer(self):
        return self._tensor

    def is_last(self):
        return self._last


def _inject_on(rank: int, parameter: torch.nn.Parameter, value: float):
    """Sets element 0 of `parameter`'s gradient to `value` on `rank` (a handle to remove)."""
    def inject(grad):
        grad = grad.clone()
        grad.view(-1)[0] = value
        return grad
    return parameter.register_hook(inject) if dist.get_rank() == rank else None


def scaled_steps(ddp, model, optimizer, grad_scaler, rank: int, steps: int, injected: dict) -> tuple:
    """Trains `steps` steps of `batches(rank, steps)` under `grad_scaler`; at each step in `injected`
    (step -> value) rank 1's first weight gradient holds that value. Returns the scale after each step
    and whether each step's gradients were finite."""
    scales, finite = [], []
    for step, (x, y) in enumerate(batches(rank, steps)):
        optimizer.zero_grad()
        handle = _inject_on(1, next(model.parameters()), injected[step]) if step in injected else None
        grad_scaler.scale(torch.nn.functional.mse_loss(ddp(x), y)).backward()
        if handle is not None:
            handle.remove()
        finite.append(all(bool(torch.isfinite(p.grad).all()) for p in model.parameters()))
        grad_scaler.step(optimizer)
        grad_scaler.update()
        scales.append(grad_scaler.get_scale())
    return scales, finite


def engine(rank: int, world_size: int, folder: str) -> dict:
    """The hook engine's own behaviours: bucket order, setup failing on one rank, reused buffers, the
    lane cap, and (last: a GradScaler, once used, stays detected in this process) the non-finite fallback with and
    without AMP's GradScaler."""
    captured = Captured()
    out = {}
    base = train(plain_ddp(make_model()), rank)
    captured.take()

    # A bucket out of order: an error under ACSPEED_STRICT=1, else one warning and the hook goes on.
    with environment(ACSPEED_STRICT="1"):
        ddp = acspeed.apply.wrap(make_model(), config(streams=2, bucket_cap_mb=0.001))
    state = acspeed._patch.state_of(ddp)
    tensors = [torch.full((4,), float(rank + i)) for i in range(3)]
    try:
        acspeed.engine.state.comm_hook(state, FakeBucket(1, tensors[1], False))
        strict_error = "no error"
    except RuntimeError as error:
        strict_error = str(error)
    state.strict = False
    futures = [acspeed.engine.state.comm_hook(state, FakeBucket(i, tensors[i], i == 2)) for i in (1, 2)]
    reduced = [future.wait().tolist() for future in futures]
    futures = [acspeed.engine.state.comm_hook(state, FakeBucket(i, tensors[i], i == 2)) for i in (0, 1, 2)]
    for future in futures:
        future.wait()
    out["order"] = {"strict_error": strict_error, "reduced": reduced, "log": captured.take()}
    del ddp

    # Setup failing on one rank: a lane group's creation, then the node discovery of hierarchical.
    hook_file = _write(folder, "engine.json", config(algorithm="reduce_scatter", streams=2, bucket_cap_mb=0.001))
    real_new_group = acspeed.engine.lanes._new_group
    calls = []

    def flaky_new_group(ranks, backend):
        group = real_new_group(ranks, backend)
        calls.append(ranks)
        if rank == 1 and len(calls) == 2:
            dist.destroy_process_group(group)
            raise RuntimeError("injected group failure")
        return group

    def no_node(*_):
        raise OSError("injected: no host name")

    for name, target, replacement, hook_config in (
            ("group", "_new_group", flaky_new_group, hook_file),
            ("topology", "_node_key", no_node,
             _write(folder, "hier.json", config(algorithm="hierarchical", bucket_cap_mb=0.001)))):
        saved = getattr(acspeed.engine.lanes, target)
        result = {}
        for strict in ("0", "1"):
            calls.clear()
            if rank == 1:
                setattr(acspeed.engine.lanes, target, replacement)
            try:
                with environment(ACSPEED_CONFIG=hook_config, ACSPEED_STRICT=strict):
                    ddp = DDP(make_model())
                    result["hook"] = acspeed._patch.state_of(ddp) is not None
                    result["equal"] = torch.equal(train(ddp, rank), base)
                    result["strict"] = "no error"
            except RuntimeError as error:
                result["strict"] = str(error)
            finally:
                setattr(acspeed.engine.lanes, target, saved)
            result["log" if strict == "0" else "strict_log"] = captured.take()
        out[f"setup/{name}"] = result

    # Buffers reused across steps: the same tensors once DDP has rebuilt its buckets (after step 1).
    ddp = acspeed.apply.wrap(make_model(), config(algorithm="reduce_scatter", compression="fp16", bucket_cap_mb=0.001))
    state = acspeed._patch.state_of(ddp)
    train(ddp, rank, steps=2)
    warm = {key: tensor.data_ptr() for key, tensor in state.scratch._tensors.items()}
    train(ddp, rank, steps=3)
    out["scratch"] = {"warm": len(warm), "same": warm == {key: t.data_ptr() for key, t in state.scratch._tensors.items()},
                      "roles": sorted({key[1] for key in warm})}
    del ddp
    captured.take()

    # More streams than the lane cap: the cap, and one warning.
    ddp = acspeed.apply.wrap(make_model(), config(streams=acspeed.engine.lanes.MAX_LANES + 4, bucket_cap_mb=0.001))
    out["lane_cap"] = {"lanes": len(acspeed._patch.state_of(ddp).lanes), "equal": torch.equal(train(ddp, rank), base),
                       "log": captured.take()}
    del ddp

    # A config replaced between steps (the seam for tuning inside a live job): more streams, asked
    # for on every rank before step 0 (collective: it builds that config's lanes), take over at step
    # 0; the uncompressed config on the first lanes, handed over in the middle of step 1, takes over
    # at step 2 (step 1 ends with the old one) and reuses the lanes built at the start.
    ddp = acspeed.apply.wrap(make_model(), config(streams=2, bucket_cap_mb=0.001, compression="fp16"))
    state = acspeed._patch.state_of(ddp)
    first_lanes = state.lanes
    uncompressed, _ = acspeed._runtime.core().CommConfig.from_json(config(streams=2, bucket_cap_mb=0.001))
    more_lanes, _ = acspeed._runtime.core().CommConfig.from_json(
        config(streams=3, bucket_cap_mb=0.001, compression="fp16"))
    state.replace_config(more_lanes)
    seen = []

    class Switching(CountingObserver):
        def bucket_launched(self, index, nbytes):
            step = sum(1 for _, i, _, _ in seen if i == 0) + (index == 0) - 1
            seen.append((step, index, state.config.compression, len(state.lanes)))
            if (step, index) == (1, 1):
                state.replace_config(uncompressed)

    acspeed._patch.attach_observer(ddp, Switching())
    train(ddp, rank, steps=3)
    out["replace"] = {"seen": seen, "first_lanes_back": state.lanes is first_lanes}
    del ddp
    captured.take()

    # fp16 compression meets an overflow (1e6 > 65504) on rank 1 at step 2, with a CPU GradScaler.
    # Fallback on (the user says there is no scaler): that bucket is re-sent uncompressed, the scaler sees
    # finite gradients and keeps its scale. Scaler in use (detected: it scaled the loss): nothing is
    # re-sent, the Inf reaches the scaler, which skips the step and backs off.
    for name, said in (("fallback_on", False), ("scaler_detected", None)):
        acspeed.configure(grad_scaler=said)
        model = make_model()
        ddp = acspeed.apply.wrap(model, config(compression="fp16", bucket_cap_mb=0.001))
        grad_scaler = torch.amp.GradScaler("cpu", init_scale=256.0, growth_interval=1000)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
        scales, finite = scaled_steps(ddp, model, optimizer, grad_scaler, rank, 3, {1: 1e6})
        out[f"scaler/{name}"] = {"scales": scales, "finite": finite,
                                 "fallbacks": acspeed._patch.state_of(ddp).nonfinite_fallbacks}
        del ddp
    acspeed.configure()
    captured.take()
    return out
