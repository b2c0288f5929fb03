"""What one reducer rebuild costs a training job, side by side (issue 36: online tuning switches the
bucket size, and removes its hook, through a rebuild: python/acspeed/reducer.py, docs/online.md).

    python3 bench/online/rebuild_cost.py --profile 2x1@1gbit --pairs 20 --out FILE

One job (bench/online/job.py's model and batch: resnet18 32x32, batch 16, fp32, gloo, SGD; plain DDP,
ACSPEED_DISABLE=1) on `acspeed-testbed` with one process per node pinned to its own core. After
--warmup steps it runs --pairs pairs of windows, each window a boundary then --window synchronised
steps; at one window of each pair (which one alternates) every rank calls `acspeed.reducer.rebuild`
at the boundary with DDP's own bucket size, so the buckets come back the same and only the rebuild
itself differs. A window's time = from the boundary to the end of its last step, maximum over ranks.
Per pair: rebuilt window - plain window (ms), and the ratio; mean with a 95% bootstrap interval
(bench/stats.py). What a rebuild costs is everything it sets off: the call itself, the new reducer's
first step in one bucket in parameter order (no overlap with backward), and DDP's bucket rebuild
(a broadcast from rank 0) in the forward after it.
Writes --out (JSON: the figures and every window's time) and prints them. Needs root (network
namespaces) and a build folder (ACSPEED_BUILD_DIR, default build/).
"""
import argparse
import datetime
import json
import pathlib
import shlex
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(HERE), str(HERE.parent), str(REPO / "examples")]  # bench_online.py, bench/stats.py, the model


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="2x1@1gbit", help="acspeed-testbed cluster")
    parser.add_argument("--pairs", type=int, default=20, help="(rebuilt, plain) window pairs")
    parser.add_argument("--window", type=int, default=3, help="steps after each boundary that are timed")
    parser.add_argument("--warmup", type=int, default=10, help="steps before the first window")
    parser.add_argument("--out", help="JSON to write (not overwritten)")
    parser.add_argument("--job", help=argparse.SUPPRESS)  # internal: run as the job, rank 0 writes JSON here
    args = parser.parse_args()
    for name in ("pairs", "window", "warmup"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} {getattr(args, name)}: at least 1")
    if not args.job and args.out and pathlib.Path(args.out).exists():
        parser.error(f"--out {args.out} exists: not overwritten")
    return args


def job(args) -> None:
    import torch  # noqa: PLC0415 - only the job needs torch
    import torch.distributed as dist  # noqa: PLC0415
    from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: PLC0415

    from acspeed import reducer  # noqa: PLC0415 - ACSPEED_DISABLE=1: plain DDP
    from Pytorch_ddp_benchmark import build_model  # noqa: PLC0415

    dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=30))
    torch.manual_seed(0)
    model, make_batch = build_model("resnet18", 32, torch.device("cpu"))
    inputs, targets = make_batch(16)
    loss_fn = torch.nn.CrossEntropyLoss()
    ddp = DDP(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss_fn(ddp(inputs), targets).backward()
        optimizer.step()

    for _ in range(args.warmup):
        step()
    windows = []  # (rebuilt, seconds on this rank)
    for pair in range(args.pairs):
        order = (True, False) if pair % 2 == 0 else (False, True)
        for rebuilt in order:
            start = time.perf_counter()
            if rebuilt:
                reducer.rebuild(ddp, None, None)  # DDP's default buckets, as built
            for _ in range(args.window):
                step()
            windows.append((rebuilt, time.perf_counter() - start))
    seconds = torch.tensor([s for _, s in windows], dtype=torch.float64)
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
    if dist.get_rank() == 0:
        record = {"windows": [{"rebuilt": r, "s": float(s)} for (r, _), s in zip(windows, seconds)],
                  "world_size": dist.get_world_size(), "torch": torch.__version__}
        pathlib.Path(args.job).write_text(json.dumps(record, indent=1) + "\n")
    dist.destroy_process_group()


def main() -> None:
    args = parse_args()
    if args.job:
        job(args)
        return
    import stats  # noqa: PLC0415
    from bench_online import testbed  # noqa: PLC0415 - the same cluster run as the online benchmark's jobs

    with tempfile.TemporaryDirectory(prefix="acspeed-rebuild-cost-") as folder:
        result_file = pathlib.Path(folder) / "job.json"
        script = (f"ACSPEED_DISABLE=1 {shlex.quote(sys.executable)} -m torch.distributed.run --nnodes \"$NNODES\" "
                  f"--node_rank \"$NODE_RANK\" --nproc_per_node 1 --master_addr \"$MASTER_ADDR\" "
                  f"--master_port \"$MASTER_PORT\" {shlex.quote(str(pathlib.Path(__file__).resolve()))} "
                  f"--pairs {args.pairs} --window {args.window} --warmup {args.warmup} "
                  f"--job {shlex.quote(str(result_file))}")
        started = time.monotonic()
        testbed(args.profile, script, 3600)
        record = json.loads(result_file.read_text())
    windows = record["windows"]
    rebuilt = [w["s"] for w in windows if w["rebuilt"]]
    plain = [w["s"] for w in windows if not w["rebuilt"]]
    result = stats.paired(rebuilt, plain)
    low, high = result["difference_ci95"]
    print(f"{args.profile}, {args.pairs} pairs of {args.window}-step windows ({time.monotonic() - started:.0f} s): "
          f"plain window p50 {result['baseline_median'] * 1e3:.1f} ms, rebuilt {result['candidate_median'] * 1e3:.1f} ms; "
          f"a rebuild costs {result['difference_mean'] * 1e3:+.1f} ms [{low * 1e3:+.1f}, {high * 1e3:+.1f}] "
          f"(ratio {result['ratio']:.3f} [{result['ratio_ci95'][0]:.3f}, {result['ratio_ci95'][1]:.3f}])")
    if args.out:
        out = {"command": [sys.executable] + sys.argv, "profile": args.profile, "window_steps": args.window,
               "warmup_steps": args.warmup, "result": result, **record}
        pathlib.Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
