"""Per-step time of a communication-heavy DDP model on the testbed (one process per node, gloo over
the node's capped link), alternated step by step with the same step under DDP's no_sync() (same
per-rank forward/backward/optimizer work, no gradient allreduce: the compute-only bound), in the
same workers, so both see the same machine load. Rank 0 prints one JSON line with, per timed pair,
the step time (max over ranks) with and without communication.

    acspeed-testbed run 2x1@1gbit --pin --torchrun -- bench/testbed/ddp_step.py --pairs 8
"""
import argparse
import contextlib
import json
import os
import time

import torch
import torch.distributed as dist
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--image", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=2, help="untimed pairs")
    parser.add_argument("--pairs", type=int, default=8, help="timed (communicating, compute-only) pairs")
    args = parser.parse_args()
    # One intra-op thread per CPU this node was pinned to (torch would otherwise use every core).
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)(num_classes=10)
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x = torch.randn(args.batch, 3, args.image, args.image)
    y = torch.randint(0, 10, (args.batch,))

    def step(communicate):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with contextlib.nullcontext() if communicate else ddp.no_sync():
            torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
        return time.perf_counter() - start

    times = {"comm": [], "compute": []}
    for i in range(args.warmup + args.pairs):
        # Alternate which goes first, so neither always follows the other.
        order = ("comm", "compute") if i % 2 == 0 else ("compute", "comm")
        for kind in order:
            t = step(kind == "comm")
            if i >= args.warmup:
                times[kind].append(t)
    gathered = [None] * world
    dist.all_gather_object(gathered, times)
    if rank == 0:
        combined = {kind: [max(g[kind][i] for g in gathered) for i in range(args.pairs)] for kind in times}
        print(json.dumps({
            "profile": os.environ.get("ACSPEED_INSTANCE_TYPE", "").removeprefix("testbed-"),
            "model": args.model, "batch": args.batch, "image": args.image,
            "params": sum(p.numel() for p in model.parameters()),
            "comm_step_s": combined["comm"], "compute_step_s": combined["compute"],
        }), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
