"""Worker-side scenarios for the DDP tests (run inside ddp_harness ranks). Each returns plain data
that the test asserts on; many configurations run inside one set of worker processes."""
import contextlib
import json
import logging
import os

import torch
import torch._dynamo
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

import acspeed
import acspeed.apply
import acspeed.hooks
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


def train(ddp, rank: int, steps: int = STEPS, micro: int = 1) -> torch.Tensor:
    """SGD with momentum; `micro` > 1 accumulates micro-batches under no_sync before the synced one."""
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


def config(**fields) -> str:
    return json.dumps({"version": 1, **fields})


def compare(result: torch.Tensor, base: torch.Tensor, start: torch.Tensor) -> dict:
    diff = (result - base).abs().max().item()
    return {"identical": bool(torch.equal(result, base)), "max_abs": diff,
            "rel_to_params": diff / base.abs().max().item(),
            "rel_to_update": diff / (base - start).abs().max().item(),
            "finite": bool(torch.isfinite(result).all())}


class _NoNative:
    """Makes the native reduce_scatter_tensor / all_gather_into_tensor unavailable, as in a gloo
    build without them."""

    def __enter__(self):
        self.saved = dist.reduce_scatter_tensor, dist.all_gather_into_tensor

        def missing(*args, **kwargs):
            raise NotImplementedError("not in this backend (test)")
        dist.reduce_scatter_tensor = dist.all_gather_into_tensor = missing

    def __exit__(self, *exc):
        dist.reduce_scatter_tensor, dist.all_gather_into_tensor = self.saved


def equivalence(rank: int, world_size: int, combos: list) -> dict:
    """combos: [(name, config_json, env, emulate_missing)]; an env value may be {rank: value}. Each
    trains STEPS steps from the same start as plain DDP and reports how far its parameters end up
    from plain DDP's."""
    captured = Captured()
    start = flat_params(make_model())
    base = train(plain_ddp(make_model()), rank)
    out = {}
    for name, text, env, emulate in combos:
        env = {key: (value[rank] if isinstance(value, dict) else value) for key, value in env.items()}
        with environment(**env), (_NoNative() if emulate else contextlib.nullcontext()):
            ddp = acspeed.apply.wrap(make_model(), text)
            state = acspeed.hooks.state_of(ddp)
            result = train(ddp, rank)
        out[name] = compare(result, base, start)
        out[name]["hook"] = state is not None
        out[name]["guard_fallbacks"] = state.guard_fallbacks if state else 0
        out[name]["emulated"] = state.collectives.emulated() if state else []
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
        out["disabled"] = {"hook": acspeed.hooks.state_of(ddp) is not None, "cap": ddp.bucket_bytes_cap,
                           "equal": torch.equal(train(ddp, rank), base), "log": captured.take()}

    with environment(ACSPEED_CONFIG=knobs_file):
        ddp = DDP(make_model())
        bucket_config = getattr(ddp, "_bucket_config", None)
        out["config_applied"] = {
            "hook": acspeed.hooks.state_of(ddp) is not None, "cap": ddp.bucket_bytes_cap,
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
        acspeed_state = acspeed.hooks.state_of(ddp)
        ddp.register_comm_hook(None, user_hook)
        result = train(ddp, rank)
        out["user_hook"] = {"calls": len(calls), "lanes": len(acspeed_state.lanes),
                            "equal": torch.equal(result, base), "log": captured.take()}

        # A built-in hook registered after acspeed's wins the same way.
        ddp = DDP(make_model())
        ddp._register_builtin_comm_hook(dist.BuiltinCommHookType.ALLREDUCE)
        out["builtin_hook"] = {"lanes": len(acspeed.hooks.state_of(ddp).lanes),
                               "equal": torch.equal(train(ddp, rank), base), "log": captured.take()}

        # Gradient accumulation under no_sync.
        base_micro = train(plain_ddp(make_model()), rank, micro=2)
        out["no_sync"] = {"equal": torch.equal(train(DDP(make_model()), rank, micro=2), base_micro),
                          "differs_from_no_accumulation": not torch.equal(base_micro, base)}

        # Two DDP models in one process, reduced in the same backward pass.
        def train_pair(first, second):
            optimizer = torch.optim.SGD(list(first.parameters()) + list(second.parameters()), lr=0.05)
            for x, y in batches(rank, STEPS):
                optimizer.zero_grad()
                (torch.nn.functional.mse_loss(first(x), y) + torch.nn.functional.mse_loss(second(x), y)).backward()
                optimizer.step()
            return torch.cat([flat_params(first), flat_params(second)])
        pair_base = train_pair(plain_ddp(make_model(1)), plain_ddp(make_model(2)))
        first, second = DDP(make_model(1)), DDP(make_model(2))
        out["two_instances"] = {"hooks": [acspeed.hooks.state_of(m) is not None for m in (first, second)],
                                "equal": torch.equal(train_pair(first, second), pair_base)}

        # Observer sees every bucket launched and completed.
        ddp = DDP(make_model())
        observer = CountingObserver()
        acspeed.hooks.attach_observer(ddp, observer)
        result = train(ddp, rank, steps=2)  # DDP's first step uses one bucket, later ones the rebuilt buckets
        out["observer"] = {"launched": sorted(observer.launched), "completed": sorted(observer.completed),
                           "nbytes": observer.nbytes, "param_bytes": start.numel() * start.element_size()}

    # torch.compile: DDPOptimizer keeps DDP's reducer, so the hook runs. (It refuses buckets smaller
    # than torch's 1 MiB first bucket, with or without acspeed, hence this config's 1 MiB.)
    with environment(ACSPEED_CONFIG=_write(folder, "compile.json",
                                           config(algorithm="reduce_scatter", streams=2, bucket_cap_mb=1))):
        ddp = DDP(make_model())
        observer = CountingObserver()
        acspeed.hooks.attach_observer(ddp, observer)
        compiled = torch.compile(ddp, backend="eager")
        result = train(compiled, rank)
        out["compile"] = {"equal": torch.equal(result, base), "buckets_seen": len(observer.launched)}
        captured.take()

        # Compiled autograd's python reducer bypasses comm hooks: acspeed steps aside and says so.

        saved = torch._dynamo.config.optimize_ddp
        torch._dynamo.config.optimize_ddp = "python_reducer"
        try:
            ddp = DDP(make_model())
            out["python_reducer"] = {"hook": acspeed.hooks.state_of(ddp) is not None, "log": captured.take()}
        finally:
            torch._dynamo.config.optimize_ddp = saved
        del ddp, compiled

    # Bad input: one warning on rank 0, DDP defaults, training runs; ACSPEED_STRICT=1 raises everywhere.
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
    }
    for name, env in bad.items():
        with environment(**env):
            ddp = DDP(make_model())
            result = {"hook": acspeed.hooks.state_of(ddp) is not None, "cap": ddp.bucket_bytes_cap,
                      "equal": torch.equal(train(ddp, rank), base), "log": captured.take()}
            with environment(ACSPEED_STRICT="1"):
                try:
                    DDP(make_model())
                    result["strict"] = "no error"
                except RuntimeError as error:
                    result["strict"] = str(error)
            captured.take()
        out[f"bad/{name}"] = result

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
        out["sparse"] = {"hook": acspeed.hooks.state_of(ddp) is not None, "log": captured.take()}

    # No compiled runtime (a broken install): one warning, DDP defaults, training runs.
    from acspeed import _runtime  # noqa: PLC0415
    saved_core = _runtime.core

    def missing_core():
        raise _runtime.RuntimeUnavailable("acspeed's C++ runtime (acspeed._core) is not built (test)")
    _runtime.core = missing_core
    try:
        with environment(ACSPEED_CONFIG=hook_file):
            ddp = DDP(make_model())
            out["no_runtime"] = {"hook": acspeed.hooks.state_of(ddp) is not None,
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
    states, groups, threads = [], [], []
    for _ in range(4):
        ddp = acspeed.apply.wrap(module, config(algorithm="hierarchical", streams=3))
        states.append(acspeed.hooks.state_of(ddp))
        groups.append([group for lane in states[-1].lanes for group in lane.groups()])
        threads.append([lane.worker._thread for lane in states[-1].lanes])
        train(ddp, rank, steps=1)
    alive = distributed_c10d._world.pg_map
    out["rewrap"] = {"groups_per_wrap": [len(g) for g in groups],
                     "groups_alive": [sum(group in alive for group in g) for g in groups],
                     "released": [len(state.lanes) == 0 for state in states],
                     "threads_alive": [sum(thread.is_alive() for thread in t) for t in threads]}
    ddp = acspeed.apply.wrap(module, config())
    out["rewrap"]["default_has_hook"] = acspeed.hooks.state_of(ddp) is not None
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


def guard(rank: int, world_size: int) -> dict:
    """fp16 compression meets a gradient fp16 cannot hold (1e6 > 65504), then a true Inf."""
    captured = Captured()
    out = {}
    for name, value in (("overflow", 1e6), ("inf", float("inf"))):
        base = _grads_after_one_step(plain_ddp(make_model()), rank, value)
        ddp = acspeed.apply.wrap(make_model(), config(compression="fp16", bucket_cap_mb=0.001))
        grads = _grads_after_one_step(ddp, rank, value)
        first_numel = next(ddp.module.parameters()).numel()
        finite = torch.isfinite(base)
        out[name] = {
            "fallbacks": acspeed.hooks.state_of(ddp).guard_fallbacks,
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
            state = acspeed.hooks.state_of(ddp)
            out[name] = {"hook": state is not None, "cap": ddp.bucket_bytes_cap,
                         "streams": len(state.lanes) if state else 0, "log": captured.take()}
            train(ddp, rank, steps=2)
    return out
