"""Per-step time of a communication-heavy DDP model on the testbed (one process per node, gloo over
the node's capped link), or of the same per-rank work without communication (--mode compute: no DDP,
no allreduce; the nodes still run side by side on their own cores). Rank 0 prints one JSON line with
the per-step time, max over ranks, of each timed step.

    acspeed-testbed run 2x1@1gbit --pin --torchrun -- bench/testbed/ddp_step.py --mode ddp
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["ddp", "compute"], default="ddp")
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--image", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    # One intra-op thread per CPU this node was pinned to (torch would otherwise use every core).
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)(num_classes=10)
    net = DDP(model) if args.mode == "ddp" else model
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    x = torch.randn(args.batch, 3, args.image, args.image)
    y = torch.randint(0, 10, (args.batch,))
    times = []
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    gathered = [None] * world
    dist.all_gather_object(gathered, times)
    if rank == 0:
        per_step = [max(ts[i] for ts in gathered) for i in range(args.steps)]
        print(json.dumps({
            "profile": os.environ.get("ACSPEED_INSTANCE_TYPE", "").removeprefix("testbed-"),
            "mode": args.mode, "model": args.model, "batch": args.batch, "image": args.image,
            "params": sum(p.numel() for p in model.parameters()),
            "step_s": per_step,
        }), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
