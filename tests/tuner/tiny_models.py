"""Tiny models for the tuner's end-to-end tests (`--model tiny_models:mlp`): small enough that a
trial takes well under a second on two CPU processes, with enough parameters for a few buckets.

`tiny_models:faulty_mlp` is the MLP that misbehaves on purpose, for the fault tests
(tests/tuner/test_trial_faults.py, and a node's on the emulated cluster in
tests/testbed/test_testbed.py); test-only, set through the environment:
  TINY_FAULTS=exit,signal,raise,oom,hang,hang_collective,kill_launcher   the faults, in order; each worker launch
                 fires the first one not fired yet (a marker file per fault in TINY_FAULT_DIR): with N
                 faults, the first N launches fail one trial each and later ones run clean
  TINY_FAULT_RANK=R   the rank that misbehaves (default 1)
  TINY_FAULT_AT=N     at its N-th forward call in the worker process (default 2: the launch's first step;
                      the first forward is the worker's model check at start-up, python/acspeed/_worker/check.py)
  TINY_FAULT_DIR=PATH the marker files
The faults: exit (os._exit(3)), signal (SIGKILL to itself), raise (RuntimeError), oom (an
address-space limit, RLIMIT_AS, set in that rank only just above what it maps, then a 1 GiB tensor),
hang (sleeps in forward), hang_collective (blocks in a barrier of a group the other ranks never enter
while they wait in DDP's allreduce), kill_launcher (SIGKILL to the rank's parent, its torchrun: the
rank goes with it, by its parent-death signal).

`tiny_models:unseeded_mlp` is the MLP initialised from torch's global generator (the others seed their
own), for the test that a session's seed decides the initial weights.
`tiny_models:corrupting_mlp` is the MLP with a deliberately harmful compressor, for the
convergence guard's test (and, on the convergence task, bench/compression): in that worker, acspeed's fp16 path hands DDP seeded noise of each
bucket's norm instead of its averaged gradient (the same on every rank, so training goes on)."""
import os
import resource
import signal
import time

import torch
import torch.distributed as dist


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
    def __init__(self, group):
        super().__init__()
        self.calls = 0
        self.group = group  # hang_collective's: every rank made it, only the faulty rank enters it

    def forward(self, x):
        self.calls += 1
        if (os.environ.get("RANK") == os.environ.get("TINY_FAULT_RANK", "1")
                and self.calls == int(os.environ.get("TINY_FAULT_AT", "2"))):
            _fire_next_fault(self.group)
        return super().forward(x)


def _fire_next_fault(group) -> None:
    folder = os.environ["TINY_FAULT_DIR"]
    for fault in os.environ["TINY_FAULTS"].split(","):
        marker = os.path.join(folder, fault)
        if os.path.exists(marker):
            continue
        open(marker, "w").close()
        print(f"tiny_models: firing {fault}", flush=True)
        if fault == "exit":
            os._exit(3)
        elif fault == "signal":
            os.kill(os.getpid(), signal.SIGKILL)
        elif fault == "raise":
            raise RuntimeError("tiny_models: injected failure")
        elif fault == "oom":
            with open("/proc/self/statm", encoding="ascii") as f:
                mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            resource.setrlimit(resource.RLIMIT_AS, (mapped + (256 << 20), resource.getrlimit(resource.RLIMIT_AS)[1]))
            torch.ones(1 << 30, dtype=torch.uint8)
        elif fault == "kill_launcher":
            os.kill(os.getppid(), signal.SIGKILL)
            time.sleep(60)  # the parent-death signal ends this rank
        elif fault == "hang":
            time.sleep(3600)
        elif fault == "hang_collective":
            dist.barrier(group=group)
        else:
            raise ValueError(f"TINY_FAULTS: unknown fault '{fault}' (accepted: exit, signal, raise, oom, hang, "
                             "hang_collective, kill_launcher)")
        return


def _make_batch(batch_size):
    # Each rank trains on its own data, so a config that skipped or garbled the gradient average
    # would end with another loss than DDP's own allreduce.
    generator = torch.Generator().manual_seed(7 + int(os.environ.get("RANK", "0")))
    return torch.randn(batch_size, 64, generator=generator), torch.randint(0, 10, (batch_size,), generator=generator)


def mlp():
    torch.manual_seed(0)
    return _Mlp(), _make_batch


def unseeded_mlp():
    """The MLP initialised from torch's global generator, as most models are: its weights are what the
    workers' seed makes them."""
    return _Mlp(), _make_batch


def faulty_mlp():
    torch.manual_seed(0)
    group = dist.new_group(backend="gloo") if "hang_collective" in os.environ.get("TINY_FAULTS", "") else None
    return _FaultyMlp(group), _make_batch


def corrupt_compressed_buckets() -> None:
    """Patches this process's hook engine: every compressed bucket's result becomes seeded noise of
    its norm (the same on every rank). Also bench/compression/teacher.py's corrupted_task."""
    from acspeed.engine import cast  # noqa: PLC0415 - the worker's engine, patched in this process only
    original = cast.Cast.plain_job
    calls = [0]

    def corrupted(self, hook, index, flat, lane, result, compress):
        job = original(self, hook, index, flat, lane, result, compress)
        if not (compress and self.wire_dtype is not None):
            return job
        calls[0] += 1
        generator = torch.Generator().manual_seed(calls[0])
        set_result = result.set_result

        # Where the engine hands the bucket to DDP: the job's finish (on the backend's thread) or, for a
        # guarded bucket on the CPU, the step's last hook call once it has checked the reduced copy.
        def noisy(value):
            result.set_result = set_result  # once: a guard's uncompressed re-send is not corrupted
            noise = torch.randn(value.numel(), generator=generator, dtype=value.dtype)
            value.copy_(noise * (value.norm() / noise.norm()))
            set_result(value)

        result.set_result = noisy
        return job

    cast.Cast.plain_job = corrupted


def corrupting_mlp():
    corrupt_compressed_buckets()
    torch.manual_seed(0)
    return _Mlp(), _make_batch
