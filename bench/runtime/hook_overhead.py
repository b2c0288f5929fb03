"""Step time with acspeed's flat-allreduce comm hook (one lane, the hook machinery alone) vs DDP's
built-in allreduce, side by side in the same 2 gloo workers: per pair, a block of steps on each
(order alternating), block median of the per-step time (max over ranks).

Usage: python bench/runtime/hook_overhead.py [--pairs 15] [--steps 5] [--bucket-mb 25 1] [--json FILE]"""
import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parents[1] / "python")]  # bench/stats.py, acspeed

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import stats  # noqa: E402


def block(ddp, optimizer, data, steps: int) -> float:
    times = []
    x, y = data
    for _ in range(steps):
        begin = time.perf_counter()
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        optimizer.step()
        times.append(time.perf_counter() - begin)
    combined = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(combined, op=dist.ReduceOp.MAX)
    return float(np.median(combined.numpy()))


def worker(rank: int, world_size: int, store: str, args, results) -> None:
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ["ACSPEED_DISABLE"] = "1"  # both models start as plain DDP; the candidate gets the hook below
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world_size)
    import torchvision  # noqa: PLC0415
    import acspeed._patch  # noqa: PLC0415
    from acspeed import _runtime  # noqa: PLC0415
    from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: PLC0415

    flat = _runtime.core().CommConfig()  # DDP's defaults: flat allreduce, one stream, uncompressed
    generator = torch.Generator().manual_seed(rank)
    data = (torch.randn(args.batch_size, 3, 32, 32, generator=generator),
            torch.randint(0, 10, (args.batch_size,), generator=generator))
    out = {}
    for bucket_mb in args.bucket_mb:
        models = {}
        for name in ("ddp", "acspeed"):
            torch.manual_seed(0)
            ddp = DDP(torchvision.models.resnet18(num_classes=10), bucket_cap_mb=bucket_mb)
            if name == "acspeed":
                acspeed._patch.install_hook(ddp, flat, dist.group.WORLD)
            models[name] = (ddp, torch.optim.SGD(ddp.parameters(), lr=0.01))
        for name in models:  # warm-up, including DDP's bucket rebuild after the first step
            block(*models[name], data, 3)
        samples = {"ddp": [], "acspeed": []}
        for pair in range(args.pairs):
            order = ("ddp", "acspeed") if pair % 2 == 0 else ("acspeed", "ddp")
            for name in order:
                samples[name].append(block(*models[name], data, args.steps))
        out[str(bucket_mb)] = samples
    if rank == 0:
        results.put(out)
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--bucket-mb", type=float, nargs="+", default=[25.0, 1.0])
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    context = mp.get_context("spawn")
    results = context.Queue()
    with tempfile.TemporaryDirectory() as folder:
        mp.start_processes(worker, args=(2, os.path.join(folder, "store"), args, results), nprocs=2,
                           start_method="spawn")
    samples = results.get(timeout=5)
    report = {}
    for bucket_mb, pair in samples.items():
        report[bucket_mb] = stats.paired(pair["acspeed"], pair["ddp"])
        report[bucket_mb]["samples"] = pair
        print(f"resnet18 32x32 batch {args.batch_size}, 2 gloo ranks, bucket_cap_mb {bucket_mb}: acspeed flat hook vs "
              f"DDP built-in allreduce: {stats.describe(report[bucket_mb], 'ms', 1000)}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
