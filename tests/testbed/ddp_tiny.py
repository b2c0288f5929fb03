"""A short multi-node DDP job for the testbed tests: a small MLP trained for --steps with gloo; each
rank writes what it saw to --out/rank<R>.json (world size, its node's environment, the peer
addresses gloo used, a checksum of the parameters), so the test can check that both nodes trained the
same model together over the emulated link."""
import argparse
import json
import os
import pathlib

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

# Its clean exit only (the test runs with ACSPEED_DISABLE=1, DDP untouched): without it torch's gloo
# aborted 2 of 5 of these jobs at exit on pinned one-core nodes (python/acspeed/_exit.py).
import acspeed  # noqa: E402,F401


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1000 + rank)  # different data per rank: only allreduce keeps them equal
    for _ in range(args.steps):
        x = torch.randn(32, 64, generator=gen)
        y = torch.randint(0, 10, (32,), generator=gen)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    checksum = float(sum(p.detach().double().sum() for p in model.parameters()))
    # Every rank's node address, gathered through the process group itself.
    addresses = [None] * world
    dist.all_gather_object(addresses, os.environ.get("NODE_ADDR"))
    record = {
        "rank": rank,
        "world_size": world,
        "node_rank": int(os.environ["NODE_RANK"]),
        "instance_type": os.environ.get("ACSPEED_INSTANCE_TYPE"),
        "gloo_ifname": os.environ.get("GLOO_SOCKET_IFNAME"),
        "addresses": addresses,
        "checksum": checksum,
    }
    pathlib.Path(args.out, f"rank{rank}.json").write_text(json.dumps(record))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
