"""Worker of tests/gpu/check_nccl_plugin.sh: DDP steps and allreduces on an NCCL process group with
libnccl-tuner-acspeed.so loaded by NCCL, switching the plugin's rules half-way through.

The environment carries the rendezvous (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and the plugin
(NCCL_TUNER_PLUGIN, ACSPEED_NCCL_RULES). Phase A runs under the rules file; then every rank calls
acspeed_nccl_tuner_set_rules (ctypes, on the library NCCL loaded) with --switch-to, and phase B
runs. Allreduces of PROBE_BYTES[phase] bytes are issued in each phase so that the check can read
NCCL's per-collective choice for them. Exit status 0 only if every step and every result is right.
`--device cpu` runs the same steps on gloo (no NCCL: the rules are set but unused), which lets the
CPU test suite check this worker (tests/nccl_plugin/test_gpu_scripts.py).
"""
import argparse
import ctypes
import inspect
import math
import os
import sys

# Allreduce message sizes per phase (bytes of float32); the rules of check_nccl_plugin.sh cover them.
PROBE_BYTES = {"A": (4096, 1 << 20), "B": (8192, 2 << 20)}


def say(rank, text):
    print(f"ACSPEED_CHECK rank {rank}: {text}", flush=True)


def synchronize(device):
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def ddp_step(model, rank, device):
    import torch

    inputs = torch.randn(32, 64, device=device, generator=torch.Generator(device).manual_seed(rank))
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(inputs).square().mean()
    loss.backward()
    optimizer.step()
    synchronize(device)
    if not math.isfinite(loss.item()):
        raise RuntimeError(f"loss is {loss.item()}")
    if all(torch.equal(b, p) for b, p in zip(before, model.parameters())):
        raise RuntimeError("the DDP step changed no parameter")
    return loss.item()


def check_replicas_equal(model, world_size):
    """After DDP steps every rank must hold the same parameters (gradients were averaged)."""
    import torch
    import torch.distributed as dist

    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(world_size)]
    dist.all_gather(gathered, flat)
    for other in gathered[1:]:
        if not torch.equal(gathered[0], other):
            raise RuntimeError("ranks disagree on the parameters after DDP steps")


def probe_allreduces(phase, rank, world_size, device):
    import torch
    import torch.distributed as dist

    for nbytes in PROBE_BYTES[phase]:
        tensor = torch.full((nbytes // 4,), float(rank + 1), device=device)
        dist.all_reduce(tensor)
        expected = world_size * (world_size + 1) / 2
        if not torch.all(tensor == expected):
            raise RuntimeError(f"allreduce of {nbytes} bytes gave {tensor[:4].tolist()}..., expected {expected}")
    synchronize(device)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--plugin", required=True, help="the libnccl-tuner-acspeed.so NCCL loads")
    parser.add_argument("--switch-to", required=True, help="config JSON file for the phase-B rules")
    parser.add_argument("--steps", type=int, default=2, help="DDP steps per phase")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cuda: NCCL on GPU 0 (the check); cpu: gloo, to test this worker without a GPU")
    args = parser.parse_args()

    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    if os.environ.get("NCCL_TUNER_PLUGIN") != args.plugin:
        raise SystemExit("NCCL_TUNER_PLUGIN must name the same file as --plugin")
    model = torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.ReLU(), torch.nn.Linear(48, 8))
    if args.device == "cuda":
        device = torch.device("cuda", 0)
        torch.cuda.set_device(device)
        # Where init_process_group has device_id (not acspeed's helper: this worker must not import acspeed).
        bind = {"device_id": device} if "device_id" in inspect.signature(dist.init_process_group).parameters else {}
        dist.init_process_group("nccl", rank=rank, world_size=world_size, **bind)
        model = torch.nn.parallel.DistributedDataParallel(model.to(device), device_ids=[0])
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", rank=rank, world_size=world_size)
        model = torch.nn.parallel.DistributedDataParallel(model)

    for step in range(args.steps):
        say(rank, f"phase A DDP step {step} loss {ddp_step(model, rank, device):.6f}")
    probe_allreduces("A", rank, world_size, device)
    dist.barrier()

    # Same library instance as NCCL's: the loader returns the handle it already has for this path.
    plugin = ctypes.CDLL(args.plugin)
    plugin.acspeed_nccl_tuner_set_rules.argtypes = [ctypes.c_char_p]
    plugin.acspeed_nccl_tuner_set_rules.restype = ctypes.c_int
    with open(args.switch_to, "rb") as f:
        status = plugin.acspeed_nccl_tuner_set_rules(f.read())
    if status != 0:
        raise RuntimeError(f"acspeed_nccl_tuner_set_rules returned {status}")
    refused = plugin.acspeed_nccl_tuner_set_rules(b'{"version": 1, "nccl_rules": [{"protocol": "ll256"}]}')
    if refused != 1:
        raise RuntimeError(f"a bad config should be refused with 1, got {refused}")
    say(rank, "rules switched through acspeed_nccl_tuner_set_rules")
    dist.barrier()

    for step in range(args.steps):
        say(rank, f"phase B DDP step {step} loss {ddp_step(model, rank, device):.6f}")
    probe_allreduces("B", rank, world_size, device)
    check_replicas_equal(model, world_size)
    dist.barrier()
    dist.destroy_process_group()
    say(rank, "done")


if __name__ == "__main__":
    sys.exit(main())
