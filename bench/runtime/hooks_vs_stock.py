"""acspeed's comm hook against torch's own paths, on the emulated cluster, alternated in one run:

  acspeed allreduce hook (one lane, uncompressed)  vs  DDP's built-in allreduce        (25 and 5 MiB buckets)
  acspeed fp16                                      vs  torch's fp16_compress_hook      (5 and 25 MiB)
  acspeed fp16, 2 lanes (streams)                   vs  torch's fp16_compress_hook      (5 and 25 MiB)
  acspeed bf16                                      vs  torch's bf16_compress_hook      (5 and 25 MiB)
  acspeed allreduce, 2 lanes (streams)              vs  the same with 1 lane            (5 MiB)
  acspeed fp16 / bf16, reduce_scatter               vs  torch's compress hook           (5 MiB)
  acspeed reduce_scatter (fp16, uncompressed)       vs  acspeed allreduce, the same     (5 MiB)
  acspeed powersgd (ranks 1 and 4)                  vs  torch's powerSGD_hook, same rank (one 64 MiB bucket)
  acspeed powersgd rank 4 at 5 MiB                  vs  powerSGD_hook rank 4 in one 64 MiB bucket

torch's powerSGD_hook issues its all-reduces from future callbacks: with two buckets in flight
their order differs between ranks and gloo aborts ("Received data size doesn't match expected
size"), so on gloo it runs only with the whole model in one bucket (bucket_cap_mb 64 >= the 44.7 MB
of gradients; DDP then caps the first bucket at the same size): the best a user of stock torch can
do here. Both PowerSGDs: error feedback, warm start, PowerSGD from step 2 (torch's minimum), so the
warm-up (4 steps) is past the start; torch's min_compression_rate 2 compresses every matrix of
resnet18 at these ranks, as acspeed does.

resnet18 (100 classes), 32x32 images, batch 16 per rank, fp32, SGD; 2 nodes x 1 process, each node
pinned to its own core (`acspeed-testbed run PROFILE --pin`), gloo over the node's capped link. For
each link profile ONE cluster runs every variant in the same long-lived workers: per pair and per
comparison, each side gets a freshly wrapped DDP model (a new acspeed hook state: new lanes), warm-up
steps (DDP rebuilds its buckets after step 1), then timed steps; a step's time is the max over ranks;
a side's sample is the median of its timed steps. The two sides of a comparison alternate which goes
first, and the comparisons rotate between pairs. Statistic per comparison: the geometric mean of the
per-pair ratios (candidate / baseline step time, < 1 is faster) with its 95% bootstrap interval
(bench/stats.py). Raw per-step times (max over ranks) go to the JSON file, which is never overwritten.

    python3 bench/runtime/hooks_vs_stock.py                   # both links, 10 pairs: ~20 min quiet, 61 min at load 13-20
                                                              # (the first ten comparisons; about 1 min a comparison
                                                              # per link and 10 pairs on the 12-07 machine)
    python3 bench/runtime/hooks_vs_stock.py --pairs 2 --links 2x1@1gbit --out /tmp/smoke.json   # a smoke run
    python3 bench/runtime/hooks_vs_stock.py --from-json FILE  # the table of an earlier run

Needs root (network namespaces) and a build folder (ACSPEED_BUILD_DIR, default build/) with
acspeed-testbed and acspeed._core.
"""
import argparse
import datetime
import gc
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(HERE.parent), str(REPO / "python")]  # bench/stats.py, acspeed

import stats  # noqa: E402

FORMAT_VERSION = 1
GOAL = 0.98  # a comparison with a stock path meets the goal when acspeed's ratio of throughput is >= this


POWERSGD_START = 2  # torch's smallest start_powerSGD_iter with error feedback and warm start
ONE_BUCKET_MB = 64  # > resnet18's 44.7 MB of fp32 gradients (100 classes)


def acspeed_side(bucket_mb: float, compression: str = "none", streams: int = 1, rank: int = 0,
                 algorithm: str = "allreduce") -> dict:
    side = {"kind": "acspeed", "bucket_mb": bucket_mb, "compression": compression, "streams": streams,
            "algorithm": algorithm}
    if rank:
        side["powersgd_rank"] = rank
    return side


def ddp_side(bucket_mb: float) -> dict:
    return {"kind": "ddp", "bucket_mb": bucket_mb}


def stock_side(bucket_mb: float, compression: str, rank: int = 0) -> dict:
    side = {"kind": "stock", "bucket_mb": bucket_mb, "compression": compression}
    if rank:
        side["powersgd_rank"] = rank
    return side


# name -> (candidate, baseline, is the baseline a stock torch path?)
COMPARISONS = {
    "allreduce hook vs DDP built-in @25MiB": (acspeed_side(25), ddp_side(25), True),
    "allreduce hook vs DDP built-in @5MiB": (acspeed_side(5), ddp_side(5), True),
    "fp16 vs fp16_compress_hook @5MiB": (acspeed_side(5, "fp16"), stock_side(5, "fp16"), True),
    "fp16 vs fp16_compress_hook @25MiB": (acspeed_side(25, "fp16"), stock_side(25, "fp16"), True),
    # the tuner stores fp16 with 2 lanes too (time to accuracy on digits, 2x1@1gbit)
    "fp16, 2 streams vs fp16_compress_hook @5MiB": (acspeed_side(5, "fp16", streams=2), stock_side(5, "fp16"), True),
    "fp16, 2 streams vs fp16_compress_hook @25MiB":
        (acspeed_side(25, "fp16", streams=2), stock_side(25, "fp16"), True),
    "bf16 vs bf16_compress_hook @5MiB": (acspeed_side(5, "bf16"), stock_side(5, "bf16"), True),
    "bf16 vs bf16_compress_hook @25MiB": (acspeed_side(25, "bf16"), stock_side(25, "bf16"), True),
    "streams 2 vs 1 @5MiB (allreduce, uncompressed)": (acspeed_side(5, streams=2), acspeed_side(5), False),
    # gloo: acspeed's reduce-scatter is an all_to_all and a local sum (python/acspeed/engine/collectives.py)
    "fp16 reduce_scatter vs fp16_compress_hook @5MiB":
        (acspeed_side(5, "fp16", algorithm="reduce_scatter"), stock_side(5, "fp16"), True),
    "bf16 reduce_scatter vs bf16_compress_hook @5MiB":
        (acspeed_side(5, "bf16", algorithm="reduce_scatter"), stock_side(5, "bf16"), True),
    "fp16 reduce_scatter vs fp16 allreduce @5MiB":
        (acspeed_side(5, "fp16", algorithm="reduce_scatter"), acspeed_side(5, "fp16"), False),
    "reduce_scatter vs allreduce @5MiB (uncompressed)":
        (acspeed_side(5, algorithm="reduce_scatter"), acspeed_side(5), False),
    "powersgd r1 vs powerSGD_hook r1 @64MiB (one bucket)":
        (acspeed_side(ONE_BUCKET_MB, "powersgd", rank=1), stock_side(ONE_BUCKET_MB, "powersgd", 1), True),
    "powersgd r4 vs powerSGD_hook r4 @64MiB (one bucket)":
        (acspeed_side(ONE_BUCKET_MB, "powersgd", rank=4), stock_side(ONE_BUCKET_MB, "powersgd", 4), True),
    "powersgd r4 @5MiB vs powerSGD_hook r4 @64MiB": (acspeed_side(5, "powersgd", rank=4),
                                                     stock_side(ONE_BUCKET_MB, "powersgd", 4), True),
}


# --- worker (one per node, under torchrun) --------------------------------------------------------

def _wrap(side: dict, make_model):
    """A fresh DDP model for one side, and what to release after it. Every side is built as DDP
    exactly as torch builds it (acspeed's constructor patch off); acspeed's hook is then installed
    with the side's config, the way `import acspeed` installs it after construction."""
    import torch.distributed as dist  # noqa: PLC0415
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook  # noqa: PLC0415
    from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: PLC0415

    import acspeed._patch  # noqa: PLC0415
    from acspeed import _runtime  # noqa: PLC0415

    os.environ["ACSPEED_DISABLE"] = "1"
    try:
        ddp = DDP(make_model(), bucket_cap_mb=side["bucket_mb"])
    finally:
        del os.environ["ACSPEED_DISABLE"]
    if side["kind"] == "stock" and side["compression"] == "powersgd":
        state = powerSGD_hook.PowerSGDState(dist.group.WORLD, matrix_approximation_rank=side["powersgd_rank"],
                                            start_powerSGD_iter=POWERSGD_START)
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
        return ddp, None
    if side["kind"] == "stock":
        hook = {"fp16": default_hooks.fp16_compress_hook, "bf16": default_hooks.bf16_compress_hook}[side["compression"]]
        ddp.register_comm_hook(dist.group.WORLD, hook)
        return ddp, None
    if side["kind"] == "ddp":
        return ddp, None
    fields = {"version": 2, "bucket_cap_mb": side["bucket_mb"], "algorithm": side["algorithm"],
              "streams": side["streams"], "compression": side["compression"]}
    if side["compression"] == "powersgd":
        fields.update(powersgd_rank=side["powersgd_rank"], powersgd_start_step=POWERSGD_START)
    text = json.dumps(fields)
    config, warnings = _runtime.core().CommConfig.from_json(text)
    if warnings:
        raise RuntimeError(f"config {text}: {warnings}")
    return ddp, acspeed._patch.install_hook(ddp, config, dist.group.WORLD)


def _measure(side: dict, make_model, data, args) -> dict:
    """Per timed step of a freshly wrapped model, each the max over ranks: the wall time and the CPU
    time of the whole process (every thread: autograd, gloo's, the hook's callbacks). Each node has
    one core, so CPU time the hook path adds is time the step's compute and gloo cannot use."""
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415

    ddp, state = _wrap(side, make_model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x, y = data
    times, cpu = [], []
    # PowerSGD sides warm up past the start step and two compressed steps (the first builds its state)
    warmup = max(args.warmup, POWERSGD_START + 2) if side.get("compression") == "powersgd" else args.warmup
    for step in range(warmup + args.steps):
        begin, begin_cpu = time.perf_counter(), time.process_time()
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        optimizer.step()
        if step >= warmup:
            times.append(time.perf_counter() - begin)
            cpu.append(time.process_time() - begin_cpu)
    if state is not None:
        assert state.nonfinite_fallbacks == 0, "the non-finite fallback re-sent a bucket: this run did not measure the compressed path"
        state.close()
    del ddp, optimizer, state
    gc.collect()
    combined = torch.tensor([times, cpu], dtype=torch.float64)
    dist.all_reduce(combined, op=dist.ReduceOp.MAX)
    return {"step_s": combined[0].tolist(), "cpu_s": combined[1].tolist()}


def worker(args) -> None:
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415
    import torchvision  # noqa: PLC0415

    import acspeed  # noqa: F401,PLC0415 - what a training script does; each side below decides what it applies

    torch.set_num_threads(len(os.sched_getaffinity(0)))  # the CPUs this node was pinned to
    dist.init_process_group("gloo")
    rank = dist.get_rank()

    def make_model():
        torch.manual_seed(0)
        return torchvision.models.resnet18(num_classes=100)

    generator = torch.Generator().manual_seed(rank)
    data = (torch.randn(args.batch_size, 3, 32, 32, generator=generator),
            torch.randint(0, 100, (args.batch_size,), generator=generator))
    names = [name for name in COMPARISONS if not args.only or any(part in name for part in args.only)]
    samples = {name: {"candidate": [], "baseline": []} for name in names}
    began = time.monotonic()
    for pair in range(args.pairs):
        shift = pair % len(names)
        for name in names[shift:] + names[:shift]:
            candidate, baseline, _ = COMPARISONS[name]
            order = (("candidate", candidate), ("baseline", baseline))
            for role, side in (order if pair % 2 == 0 else order[::-1]):
                samples[name][role].append(_measure(side, make_model, data, args))
        if rank == 0:
            print(f"pair {pair + 1}/{args.pairs} done after {time.monotonic() - began:.0f} s", flush=True)
    if rank == 0:
        pathlib.Path(args.result_file).write_text(json.dumps({
            "world_size": dist.get_world_size(), "threads": torch.get_num_threads(),
            "samples": samples}) + "\n")
    dist.destroy_process_group()


# --- driver --------------------------------------------------------------------------------------

def summarize(record: dict, measure: str = "step_s") -> dict:
    """comparison -> link -> stats.paired() of the per-pair medians of `measure` (step_s, cpu_s)."""
    out = {}
    for link, entry in record["links"].items():
        for name, sides in entry["samples"].items():
            candidate = [statistics.median(block[measure]) for block in sides["candidate"]]
            baseline = [statistics.median(block[measure]) for block in sides["baseline"]]
            out.setdefault(name, {})[link] = stats.paired(candidate, baseline)
    return out


def print_table(record: dict) -> None:
    summary = summarize(record)
    print("\n| comparison (candidate vs baseline) | link | pairs | baseline p50 (ms) | candidate p50 (ms) "
          "| step-time ratio candidate/baseline [95% CI] | throughput ratio [95% CI] | goal >= 0.98 |")
    print("|---|---|---|---|---|---|---|---|")
    for name, links in summary.items():
        stock = COMPARISONS[name][2] if name in COMPARISONS else True
        for link, result in links.items():
            ratio, (low, high) = result["ratio"], result["ratio_ci95"]
            verdict = "-" if not stock else ("met" if 1 / ratio >= GOAL else "missed") + \
                (" (interval includes 0.98)" if 1 / high < GOAL <= 1 / low else "")
            print(f"| {name} | {link} | {result['pairs']} | {result['baseline_median'] * 1e3:.1f} | "
                  f"{result['candidate_median'] * 1e3:.1f} | {ratio:.3f} [{low:.3f}, {high:.3f}] | "
                  f"{1 / ratio:.3f} [{1 / high:.3f}, {1 / low:.3f}] | {verdict} |", flush=True)
    cpu = summarize(record, "cpu_s")
    print("\n| comparison (candidate vs baseline) | link | baseline CPU per step (ms) | candidate CPU per step (ms) "
          "| candidate - baseline (ms) [95% CI] |")
    print("|---|---|---|---|---|")
    for name, links in cpu.items():
        for link, result in links.items():
            low, high = result["difference_ci95"]
            print(f"| {name} | {link} | {result['baseline_median'] * 1e3:.1f} | {result['candidate_median'] * 1e3:.1f} "
                  f"| {result['difference_mean'] * 1e3:+.1f} [{low * 1e3:+.1f}, {high * 1e3:+.1f}] |", flush=True)


def _relevant_environment() -> dict:
    return {name: value for name, value in os.environ.items()
            if name.startswith(("ACSPEED_", "NCCL_", "CUDA_", "GLOO_"))}


def _load_average() -> list:
    return [round(value, 2) for value in os.getloadavg()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--links", nargs="+", default=["2x1@1gbit", "2x1@2gbit"], help="testbed profiles, in order")
    parser.add_argument("--pairs", type=int, default=10, help="alternated pairs per comparison (>= 10 for the goal)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps after each wrap")
    parser.add_argument("--steps", type=int, default=9, help="timed steps per side and pair (steps 3-11)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--only", nargs="+", help="run only the comparisons whose name contains one of these")
    parser.add_argument("--out", help="raw results (JSON, never overwritten); default "
                        "bench/runtime/results/hooks_vs_stock_<UTC time>.json")
    parser.add_argument("--testbed", help="the acspeed-testbed executable (default: $ACSPEED_BUILD_DIR/bin)")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--from-json", metavar="FILE", help="print the table of an earlier run, run nothing")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--result-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    if args.from_json:
        print_table(json.loads(pathlib.Path(args.from_json).read_text()))
        return
    if args.only:
        unknown = [part for part in args.only if not any(part in name for name in COMPARISONS)]
        if unknown:
            parser.error(f"--only {unknown} matches none of: {', '.join(COMPARISONS)}")
    stamp = datetime.datetime.now(datetime.timezone.utc)
    out = pathlib.Path(args.out or HERE / "results" / f"hooks_vs_stock_{stamp:%Y-%m-%dT%H%M}.json")
    if out.exists():
        sys.exit(f"{out} exists; not overwriting it")
    build = pathlib.Path(os.environ.get("ACSPEED_BUILD_DIR", REPO / "build")).resolve()
    testbed = args.testbed or str(build / "bin" / "acspeed-testbed")
    import torch  # noqa: PLC0415
    record = {"version": FORMAT_VERSION, "command": sys.argv, "date": stamp.isoformat(), "torch": torch.__version__,
              "python": platform.python_version(), "kernel": platform.release(), "cpus": os.cpu_count(),
              "environment": _relevant_environment(), "model": "resnet18 (100 classes), 32x32, fp32, SGD",
              "batch_size": args.batch_size, "warmup": args.warmup, "steps": args.steps, "pairs": args.pairs,
              "step_time": "per step: max over ranks (wall step_s, process CPU cpu_s); per side and pair: median of the timed steps",
              "comparisons": {name: {"candidate": c, "baseline": b, "stock_baseline": s}
                              for name, (c, b, s) in COMPARISONS.items()},
              "links": {}}
    env = dict(os.environ, ACSPEED_PYTHON=args.python, PYTHONPATH=os.pathsep.join(
        [str(REPO / "python")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    worker_args = ["--pairs", str(args.pairs), "--warmup", str(args.warmup), "--steps", str(args.steps),
                   "--batch-size", str(args.batch_size)] + (["--only", *args.only] if args.only else [])
    with tempfile.TemporaryDirectory(prefix="hooks-vs-stock-") as folder:
        for link in args.links:
            result_file = pathlib.Path(folder) / f"{link.replace('/', '_')}.json"
            load_before, begin = _load_average(), time.monotonic()
            command = [testbed, "run", link, "--pin", "--timeout", "7200", "--torchrun", "--python", args.python,
                       "--", str(pathlib.Path(__file__).resolve()), "--worker", "--result-file", str(result_file),
                       *worker_args]
            print(f"{link}: {' '.join(command)}", flush=True)
            subprocess.run(command, env=env, check=True)
            entry = json.loads(result_file.read_text())
            entry.update(load_average_before=load_before, load_average_after=_load_average(),
                         wall_s=round(time.monotonic() - begin, 1))
            record["links"][link] = entry
            print(f"{link}: {entry['wall_s']} s, load average before {load_before}, after "
                  f"{entry['load_average_after']}", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"raw results: {out}")
    print_table(record)


if __name__ == "__main__":
    main()
