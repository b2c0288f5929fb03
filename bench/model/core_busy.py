"""How busy a node's core is during DDP steps: the measurement behind the step model's CPU floor
(bench/model/RESULTS.md). Run on each node of a testbed cluster (one process per node, --pin), with
or without acspeed's config; prints one RESULT line per node: per-step medians of the wall time, the
process's CPU time and the busy/softirq/system/idle time of the cores the process may run on
(/proc/stat), and the step time (max over ranks).

  build/bin/acspeed-testbed run 2x1@2gbit --pin -- sh -c 'ACSPEED_CONFIG=fp16.json python3 -m \\
      torch.distributed.run --nnodes $NNODES --node_rank $NODE_RANK --nproc_per_node 1 \\
      --master_addr $MASTER_ADDR --master_port $MASTER_PORT bench/model/core_busy.py'

resnet18, 32x32 images, batch 16, fp32, SGD; 4 warm-up steps, STEPS (default 12) timed."""
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torchvision

import acspeed  # noqa: F401 - ACSPEED_CONFIG / ACSPEED_DISABLE choose what it applies

BUSY, IDLE, SYSTEM, SOFTIRQ = (0, 1, 2, 5, 6, 7), (3,), (2,), (6,)  # /proc/stat columns after the name


def core_seconds() -> dict:
    cores = os.sched_getaffinity(0)
    totals = [0] * 8
    with open("/proc/stat") as stat:
        for line in stat:
            fields = line.split()
            if fields[0].startswith("cpu") and fields[0] != "cpu" and int(fields[0][3:]) in cores:
                for i, value in enumerate(fields[1:9]):
                    totals[i] += int(value)
    hz = os.sysconf("SC_CLK_TCK")
    return {name: sum(totals[i] for i in columns) / hz
            for name, columns in (("busy", BUSY), ("idle", IDLE), ("system", SYSTEM), ("softirq", SOFTIRQ))}


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    ddp = torch.nn.parallel.DistributedDataParallel(torchvision.models.resnet18(num_classes=10))
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    inputs, targets = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))

    def step():
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(ddp(inputs), targets).backward()
        optimizer.step()

    for _ in range(4):
        step()
    rows = []
    for _ in range(int(os.environ.get("STEPS", "12"))):
        cores_before, cpu_before, begin = core_seconds(), time.process_time(), time.perf_counter()
        step()
        wall, cpu, cores_after = time.perf_counter() - begin, time.process_time() - cpu_before, core_seconds()
        rows.append({"wall": wall, "process_cpu": cpu, **{k: cores_after[k] - cores_before[k] for k in cores_after}})
    walls = torch.tensor([r["wall"] for r in rows], dtype=torch.float64)
    dist.all_reduce(walls, op=dist.ReduceOp.MAX)
    out = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    out.update(step_max_over_ranks=statistics.median(walls.tolist()), node=os.environ.get("NODE_RANK"),
               config=os.environ.get("ACSPEED_CONFIG") or ("defaults" if os.environ.get("ACSPEED_DISABLE") else None))
    print("RESULT " + json.dumps(out), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
