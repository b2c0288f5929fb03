"""One rank of a short gloo DDP run measured by StepProbe (started by test_cpu_probe.py).

The model is built for communication to dominate: a stack of wide Linear layers (many parameters)
applied to a tiny batch (little compute). Rank 0 writes the probe's summary as JSON to --out.
Communication: DDP's built-in allreduce (default), the minimal observed hook below (--hook), or
acspeed's own hook when `import acspeed` applies a config (ACSPEED_CONFIG) that needs one.
"""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist

from acspeed.probes import BucketObserver, StepProbe


def observed_allreduce_hook(observer, bucket):
    """A minimal allreduce comm hook that reports to the observer (BucketObserver's contract)."""
    index = bucket.index()
    tensor = bucket.buffer()
    observer.bucket_launched(index, tensor.numel() * tensor.element_size())
    fut = dist.all_reduce(tensor, async_op=True).get_future()
    world = dist.get_world_size()

    def done(f):
        observer.bucket_completed(index)
        return f.value()[0].div_(world)

    return fut.then(done)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world-size", type=int, required=True)
    ap.add_argument("--store", required=True, help="file for torch.distributed's FileStore")
    ap.add_argument("--hook", action="store_true", help="register the observed allreduce hook")
    ap.add_argument("--acspeed-hook", action="store_true",
                    help="attach the probe to the comm hook acspeed registered (ACSPEED_CONFIG)")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(0)
    dist.init_process_group("gloo", init_method=f"file://{args.store}", rank=args.rank,
                            world_size=args.world_size)
    layers = [torch.nn.Linear(args.width, args.width) for _ in range(args.layers)]
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*layers))
    probe = StepProbe(model)
    assert isinstance(probe, BucketObserver)
    if args.hook:
        model.register_comm_hook(probe, observed_allreduce_hook)
    if args.acspeed_hook:
        import acspeed
        acspeed.attach_observer(model, probe)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(2, args.width)

    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            probe.reset()
        probe.step_begin()
        loss = model(x).square().mean()
        loss.backward()
        probe.backward_end()
        opt.step()
        opt.zero_grad(set_to_none=True)
        probe.step_end()

    summary = probe.summary()
    summary["hook_registered"] = model._get_ddp_logging_data().get("comm_hook", "") != ""
    from acspeed import _patch  # noqa: PLC0415
    summary["acspeed_hook"] = _patch.state_of(model) is not None
    summary["parameter_bytes"] = sum(p.numel() * p.element_size() for p in model.parameters())
    if args.rank == 0:
        with open(args.out, "w") as f:
            json.dump(summary, f)
        print(StepProbe.format(summary), file=sys.stderr)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
