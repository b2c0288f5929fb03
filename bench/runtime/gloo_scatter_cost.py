"""What gloo's collectives cost in CPU for one bucket, against acspeed's reduce-scatter built from
all_to_all and a local sum (python/acspeed/engine/collectives.py): two ranks on loopback, each
pinned to its own core, one thread each; per operation the wall time and the process CPU time
(every thread: gloo's included), the median of --repeats after one untimed run. What it shows: the
CPU a collective takes from the step's compute on a testbed node, where one core does both.

  all_reduce                 fp32 and fp16 (gloo sums float16 one element at a time)
  reduce_scatter + all_gather  gloo's own, fp32 and fp16
  all_to_all + sum + all_gather  acspeed's path (Collectives.reduce_scatter_by_all_to_all), fp32 and fp16

    python3 -m torch.distributed.run --nproc_per_node 2 bench/runtime/gloo_scatter_cost.py [--bucket-mb 10]
"""
import argparse
import os
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))  # acspeed

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from acspeed.engine.collectives import Collectives  # noqa: E402


def measure(operation, repeats: int):
    operation()
    dist.barrier()
    wall, cpu = [], []
    for _ in range(repeats):
        dist.barrier()
        begin, begin_cpu = time.perf_counter(), time.process_time()
        operation()
        wall.append(time.perf_counter() - begin)
        cpu.append(time.process_time() - begin_cpu)
    both = torch.tensor([statistics.median(wall), statistics.median(cpu)], dtype=torch.float64)
    dist.all_reduce(both, op=dist.ReduceOp.MAX)
    return both.tolist()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bucket-mb", type=float, default=10.0, help="the bucket's size in fp32 (MiB)")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    rank = int(os.environ["RANK"])
    os.sched_setaffinity(0, {rank % os.cpu_count()})
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    group = dist.group.WORLD
    numel = int(args.bucket_mb * 2**20) // 4 // world * world
    coll = Collectives.detect(group, (torch.float32, torch.float16), torch.device("cpu"))
    generator = torch.Generator().manual_seed(rank)
    rows = []
    for dtype in (torch.float32, torch.float16):
        flat = torch.randn(numel, generator=generator).to(dtype)
        work, received, shard = flat.clone(), torch.empty_like(flat), torch.empty(numel // world, dtype=dtype)
        mine = work[rank * (numel // world):(rank + 1) * (numel // world)]

        def all_reduce():
            work.copy_(flat)
            dist.all_reduce(work)

        def gloo_scatter():
            work.copy_(flat)
            dist.reduce_scatter_tensor(shard, work)
            dist.all_gather_into_tensor(work, shard)

        def by_all_to_all():
            work.copy_(flat)
            coll.reduce_scatter_by_all_to_all(mine, received, work, group).wait()
            coll.all_gather(work, mine, group).wait()

        results = {}
        for name, operation in (("all_reduce", all_reduce), ("reduce_scatter + all_gather", gloo_scatter),
                                ("all_to_all + sum + all_gather", by_all_to_all)):
            rows.append((name, str(dtype).replace("torch.", ""), *measure(operation, args.repeats)))
            results[name] = work.clone()
        same = torch.equal(results["all_to_all + sum + all_gather"], results["all_reduce"])
        rows.append((f"acspeed's result == all_reduce's ({world} ranks)", str(dtype).replace("torch.", ""), same, None))
    if rank == 0:
        print(f"{world} ranks, {numel} elements a bucket ({args.bucket_mb} MiB in fp32), median of {args.repeats}, "
              f"max over ranks; torch {torch.__version__}")
        print("| operation | dtype | wall (ms) | CPU (ms) |\n|---|---|---|---|")
        for name, dtype, wall, cpu in rows:
            if cpu is None:
                print(f"| {name} | {dtype} | {wall} | |")
            else:
                print(f"| {name} | {dtype} | {wall * 1e3:.2f} | {cpu * 1e3:.2f} |")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
