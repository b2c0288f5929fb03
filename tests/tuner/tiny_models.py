"""Tiny models for the tuner's end-to-end tests (`--model tiny_models:mlp`): small enough that a
trial takes well under a second on two CPU processes, with enough parameters for a few buckets.

`tiny_models:faulty_mlp` injects one fault on rank 0, once per test (a marker file remembers it):
TINY_FAULT=raise|hang, TINY_FAULT_AT=N (the N-th forward call of the worker process),
TINY_FAULT_MARKER=PATH. It lets a test check that a crashed or hung trial is recorded as failed or
timed out and that the tuner goes on with fresh workers.

`tiny_models:corrupting_mlp` is the MLP with a deliberately harmful compressor, for the
convergence guard's test: in that worker, acspeed's fp16 path hands DDP seeded noise of each
bucket's norm instead of its averaged gradient (the same on every rank, so training goes on)."""
import os
import time

import torch


class _Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(64, 256), torch.nn.ReLU(),
            torch.nn.Linear(256, 256), torch.nn.ReLU(),
            torch.nn.Linear(256, 10))

    def forward(self, x):
        return self.layers(x)


class _FaultyMlp(_Mlp):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        marker = os.environ["TINY_FAULT_MARKER"]
        if (os.environ.get("RANK") == "0" and self.calls == int(os.environ["TINY_FAULT_AT"])
                and not os.path.exists(marker)):
            open(marker, "w").close()
            if os.environ["TINY_FAULT"] == "hang":
                time.sleep(3600)
            raise RuntimeError("tiny_models: injected failure")
        return super().forward(x)


def _make_batch(batch_size):
    # Each rank trains on its own data, so a config that skipped or garbled the gradient average
    # would end with another loss than DDP's own allreduce.
    generator = torch.Generator().manual_seed(7 + int(os.environ.get("RANK", "0")))
    return torch.randn(batch_size, 64, generator=generator), torch.randint(0, 10, (batch_size,), generator=generator)


def mlp():
    torch.manual_seed(0)
    return _Mlp(), _make_batch


def faulty_mlp():
    torch.manual_seed(0)
    return _FaultyMlp(), _make_batch


def _corrupt_compressed_buckets() -> None:
    import acspeed.hooks as hooks  # noqa: PLC0415 - the worker's engine, patched in this process only
    original = hooks.HookState._job
    calls = [0]

    def corrupted(self, index, flat, lane, result, compress):
        job = original(self, index, flat, lane, result, compress)
        if not (compress and self.compression is not None):
            return job
        finish = job.finish
        calls[0] += 1
        generator = torch.Generator().manual_seed(calls[0])

        def noisy():
            value = finish()
            if value is not None:
                noise = torch.randn(value.numel(), generator=generator, dtype=value.dtype)
                value.copy_(noise * (value.norm() / noise.norm()))
            return value

        job.finish = noisy
        return job

    hooks.HookState._job = corrupted


def corrupting_mlp():
    _corrupt_compressed_buckets()
    torch.manual_seed(0)
    return _Mlp(), _make_batch
