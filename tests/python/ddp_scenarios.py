"""Worker-side scenarios for the DDP tests (run inside ddp_harness ranks). Each returns plain data
that the test asserts on; many configurations run inside one set of worker processes."""
import contextlib
import json
import logging
import os

import torch
import torch.distributed as dist

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


def train(ddp, rank: int, steps: int = STEPS, micro: int = 1, grad_hook=None) -> torch.Tensor:
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
