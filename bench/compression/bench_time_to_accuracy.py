"""Time to accuracy: plain DDP against the config `acspeed-tune --compression none,fp16,powersgd
--data digits:batches` stores, trained to the same test accuracy on a real dataset (issue 26 item 6).

    bench/quiet_run.sh python3 bench/compression/bench_time_to_accuracy.py    # root, scikit-learn installed

On an `acspeed-testbed` cluster of --profile (2x1@1gbit: 2 nodes x 1 process, pinned, each link
capped at 1 Gbit/s), resnet18 at 32x32 on scikit-learn's digits (bench/compression/digits.py: shipped
inside the scikit-learn wheel, nothing downloaded), batch 16 per rank, SGD lr --lr momentum 0.9:
  1. `acspeed-tune --model digits:model --data digits:batches --compression none,fp16,powersgd` into a
     fresh store: the decision, with its step speedup, step inflation and effective speedup;
  2. for each of --seeds seeds, plain DDP (ACSPEED_DISABLE=1) and the tuned config (`import acspeed`),
     alternated, each trained --epochs epochs, the test accuracy measured every --eval-every steps
     outside the timed wall clock;
  3. target = the lowest final test accuracy plain DDP reached over the seeds (or --target); per seed:
     wall time of each run to the first evaluation at or above the target, ratio = plain / tuned,
     geometric mean with a 95% Student-t interval; final accuracy of both at the epoch budget;
     measured inflation = tuned steps to the target / plain steps, next to the tuner's estimate.
Goal of the issue: >= 2x faster to the same accuracy, final accuracy within 0.5 points.

`--train` is the per-node training run (under torchrun, as the driver launches it).
NOT RUN YET: it needs long runs on a quiet machine (about 3 seeds x 2 runs x --epochs epochs at
0.15-0.45 s per step, plus a tuning session; on the order of an hour).
"""
import argparse
import json
import os
import pathlib
import shlex
import sqlite3
import statistics
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "bench" / "tuner"))
sys.path.insert(0, str(HERE))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="2x1@1gbit")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=12, help="the fixed epoch budget of every run")
    parser.add_argument("--eval-every", type=int, default=10, help="steps between test evaluations")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--target", type=float, help="test accuracy to reach (default: plain DDP's lowest final)")
    parser.add_argument("--tune-args", default="--compression none,fp16,powersgd --bucket-mb 5,25 --algorithms "
                        "allreduce,reduce_scatter --streams 1,2 --warmup 12 --steps 6 --repeats 3")
    parser.add_argument("--out", default=str(HERE / "results" / "time_to_accuracy.json"))
    parser.add_argument("--train", action="store_true", help="one training run on this node (under torchrun)")
    parser.add_argument("--seed", type=int, default=0, help="--train: the run's seed")
    parser.add_argument("--json", help="--train: where rank 0 writes the run's curve")
    return parser.parse_args()


def train(args) -> None:
    """One run: --epochs epochs of DDP (acspeed applies the stored config unless ACSPEED_DISABLE=1);
    rank 0 writes [(step, wall_s, test accuracy)] with the wall clock stopped during evaluations."""
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415
    import acspeed  # noqa: F401, PLC0415 - the one line; ACSPEED_DISABLE=1 turns it off
    import digits  # noqa: PLC0415

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    net, _ = digits.model(seed=args.seed)  # the same initial weights on every rank, others per seed
    ddp = torch.nn.parallel.DistributedDataParallel(net)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    _, (test_images, test_labels) = digits.split()

    def accuracy() -> float:
        net.eval()
        with torch.no_grad():
            correct = (net(test_images).argmax(dim=1) == test_labels).sum().item()
        net.train()
        return correct / len(test_labels)

    curve, wall, step = [], 0.0, 0
    for epoch in range(args.epochs):
        for inputs, targets in digits.epoch_batches(rank, world, args.batch_size, epoch, seed=args.seed):
            start = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(ddp(inputs), targets).backward()
            optimizer.step()
            clock = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
            dist.all_reduce(clock, op=dist.ReduceOp.MAX)  # a step lasts as long as its slowest rank
            wall += clock.item()
            step += 1
            if step % args.eval_every == 0:
                curve.append((step, wall, accuracy()))
    curve.append((step, wall, accuracy()))
    if rank == 0:
        pathlib.Path(args.json).write_text(json.dumps({"seed": args.seed, "acspeed": os.environ.get(
            "ACSPEED_DISABLE") != "1", "curve": curve}))
    dist.destroy_process_group()


def first_reaching(curve, target: float):
    """(step, wall_s) of the first evaluation at or above target, or None."""
    return next(((step, wall) for step, wall, acc in curve if acc >= target), None)


def main() -> int:
    args = parse_args()
    if args.train:
        train(args)
        return 0
    import bench_tuner  # noqa: PLC0415 - testbed(), tune(), build_dir()
    import stats  # noqa: PLC0415
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "python"), str(HERE)] +
                                        [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    work = pathlib.Path(tempfile.mkdtemp(prefix="acspeed-tta-"))
    db = work / "tta.db"
    tune_args = argparse.Namespace(profile=args.profile, model="digits:model", precision="fp32", image_size=32,
                                   batch_size=args.batch_size, seed=1,
                                   tune_args=args.tune_args + " --data digits:batches")
    tuned = bench_tuner.tune(tune_args, db, "auto", env)
    with sqlite3.connect(db) as conn:
        evidence = json.loads(conn.execute("SELECT evidence_json FROM decisions WHERE active = 1 ORDER BY id DESC "
                                           "LIMIT 1").fetchone()[0])
    print(json.dumps(tuned, indent=2), flush=True)
    run = (f"{shlex.quote(sys.executable)} -m torch.distributed.run --nnodes \"$NNODES\" --node_rank \"$NODE_RANK\" "
           f"--nproc_per_node 1 --master_addr \"$MASTER_ADDR\" --master_port \"$MASTER_PORT\" "
           f"{shlex.quote(str(pathlib.Path(__file__).resolve()))} --train --epochs {args.epochs} "
           f"--eval-every {args.eval_every} --batch-size {args.batch_size} --lr {args.lr}")
    lines = ["set -e"]
    for seed in range(1, args.seeds + 1):
        order = [("tuned", ""), ("plain", "ACSPEED_DISABLE=1 ")] if seed % 2 else \
                [("plain", "ACSPEED_DISABLE=1 "), ("tuned", "")]
        for name, prefix in order:
            lines.append(f"{prefix}ACSPEED_DB={shlex.quote(str(db))} {run} --seed {seed} "
                         f"--json {shlex.quote(str(work / f'{name}-{seed}.json'))}")
    bench_tuner.testbed(args.profile, "\n".join(lines), env, timeout=12 * 3600)
    runs = {(name, seed): json.loads((work / f"{name}-{seed}.json").read_text())["curve"]
            for name in ("plain", "tuned") for seed in range(1, args.seeds + 1)}
    target = args.target or min(runs[("plain", s)][-1][2] for s in range(1, args.seeds + 1))
    ratios, inflations, rows = [], [], []
    for seed in range(1, args.seeds + 1):
        plain, tuned_run = first_reaching(runs[("plain", seed)], target), first_reaching(runs[("tuned", seed)], target)
        row = {"seed": seed, "plain": plain, "tuned": tuned_run, "plain_final": runs[("plain", seed)][-1][2],
               "tuned_final": runs[("tuned", seed)][-1][2]}
        if plain and tuned_run:
            ratios.append(plain[1] / tuned_run[1])
            inflations.append(tuned_run[0] / plain[0])
        rows.append(row)
    result = {"target_accuracy": target, "runs": rows, "tuning": tuned, "tuner_speedups": evidence.get("speedups"),
              "measured_inflation": inflations, "args": vars(args)}
    if len(ratios) >= 2:
        result["time_to_target_speedup"] = dict(zip(("estimate", "ci_low", "ci_high"),
                                                     stats.geometric_mean_t_interval(ratios)))
    result["final_accuracy_gap_points"] = 100 * (statistics.mean(r["plain_final"] for r in rows) -
                                                 statistics.mean(r["tuned_final"] for r in rows))
    pathlib.Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("target_accuracy", "final_accuracy_gap_points", "measured_inflation")},
                     indent=2))
    print("time to target, plain / tuned:", result.get("time_to_target_speedup", "fewer than two seeds reached it"))
    print("tuner's estimate:", (evidence.get("speedups") or {}).get("inflation"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
