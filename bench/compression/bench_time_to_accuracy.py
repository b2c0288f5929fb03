"""Time to accuracy: plain DDP against the config `acspeed-tune --compression none,fp16,powersgd
--data digits:batches` stores, trained to the same test accuracy on a real dataset (issue 26 item 6).

    bench/quiet_run.sh python3 bench/compression/bench_time_to_accuracy.py    # root, scikit-learn installed

On an `acspeed-testbed` cluster of --profile (2x1@1gbit: 2 nodes x 1 process, pinned, each link
capped at 1 Gbit/s), resnet18 at 32x32 on scikit-learn's digits (bench/compression/digits.py: shipped
inside the scikit-learn wheel, nothing downloaded), batch 16 per rank, SGD lr --lr momentum 0.9
(--schedule cosine: annealed to 0 over the budget):
  1. `acspeed-tune --model M --data digits:batches --compression none,fp16,powersgd` (M: --model) into a
     fresh store (or --db: a store tuned before): the decision, with its step speedup, step inflation
     and effective speedup, and the guard's verdict and inflation estimate for every numerics;
  2. for each of --seeds seeds, in one cluster, these arms in an order rotated per seed, each trained
     --epochs epochs, the test accuracy measured every --eval-every steps outside the timed wall clock:
       plain      DDP's defaults (ACSPEED_DISABLE=1);
       tuned      `import acspeed`: the stored decision (each run records the config it applied);
       torch      torch's stock hook for the tuned config's math (fp16_compress_hook,
                  bf16_compress_hook, or PowerSGD with the same rank and start step) on DDP's default
                  buckets (PowerSGD: one 64 MiB bucket, the only size torch's hook runs at on gloo),
                  without acspeed: the best a user does without us (only when tuned compresses);
       other numerics the search tried but did not choose (e.g. PowerSGD rank 1, rank 4), forced
                  (ACSPEED_CONFIG) on the decision's buckets and algorithm: whether the guard's and
                  the rule's verdicts hold over a whole training (--no-others: skip them);
  3. target = the lowest final test accuracy plain DDP reached over the seeds (or --target); per seed
     and arm: wall time to the first evaluation at or above the target, ratio = plain / arm (and
     torch / tuned), geometric mean with a 95% Student-t interval; final accuracy at the epoch budget
     and its difference from plain's run of the same seed (mean, 95% Student-t interval);
     measured inflation = the arm's steps to the target / plain's, next to the tuner's estimate.
Goal of the issue: >= 2x faster to the same accuracy, final accuracy within 0.5 points.

`--train` is the per-node training run (under torchrun, as the driver launches it).
"""
import argparse
import json
import os
import pathlib
import shlex
import shutil
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
import stats  # noqa: E402 - bench/stats.py: the geometric mean and its interval


# The tune step's search space and trial options (bench/compression/reruns.py reruns it).
TUNE_ARGS = ("--compression none,fp16,powersgd --bucket-mb 5,25 --algorithms allreduce,reduce_scatter --streams 1,2 "
             "--warmup 12 --steps 6 --repeats 3")


def new_results_file(stem: str, given=None) -> pathlib.Path:
    """`given`, else results/<stem>_<UTC time>.json; a file that exists is never written over (the
    process id is added to the name)."""
    out = pathlib.Path(given or HERE / "results" / f"{stem}_{time.strftime('%Y-%m-%dT%H%M', time.gmtime())}.json")
    return out.with_name(f"{out.stem}_{os.getpid()}{out.suffix}") if out.exists() else out


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="2x1@1gbit")
    parser.add_argument("--model", default="digits:model", choices=("digits:model", "digits:model10"),
                        help="resnet18 with 1000 outputs, or with a 10-class head (bench/compression/digits.py)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=12, help="the fixed epoch budget of every run")
    parser.add_argument("--eval-every", type=int, default=10, help="steps between test evaluations")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--schedule", choices=("constant", "cosine"), default="constant",
                        help="the learning rate: --lr throughout, or cosine-annealed from --lr to 0 over the "
                        "--epochs budget (a final accuracy of the budget that SGD noise does not decide)")
    parser.add_argument("--target", type=float, help="test accuracy to reach (default: plain DDP's lowest final)")
    parser.add_argument("--tune-args", default=TUNE_ARGS)
    parser.add_argument("--db", help="a store tuned before (skips step 1; the run works on a copy)")
    parser.add_argument("--no-others", action="store_true", help="only plain, tuned and torch's stock hook")
    parser.add_argument("--smooth-evals", type=int, default=5, help="accuracy = trailing mean of this many "
                        "evaluations (to reach the target, and the smoothed final)")
    parser.add_argument("--from", dest="from_json", help="re-analyse a result this script wrote (its raw curves)")
    parser.add_argument("--out", help="raw results (JSON; default: results/time_to_accuracy_<UTC time>.json, "
                                      "an existing file is never overwritten)")
    parser.add_argument("--train", action="store_true", help="one training run on this node (under torchrun)")
    parser.add_argument("--seed", type=int, default=0, help="--train: the run's seed")
    parser.add_argument("--stock-hook", help="--train: torch's own hook instead of acspeed: fp16, bf16 or "
                        "powersgd:RANK:START_STEP")
    parser.add_argument("--json", help="--train: where rank 0 writes the run's curve")
    return parser.parse_args()


def register_stock_hook(ddp, spec: str) -> None:
    """torch's own comm hook for `spec` (fp16, bf16, powersgd:RANK:START_STEP) on `ddp`."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook  # noqa: PLC0415
    name, *fields = spec.split(":")
    if name == "fp16":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif name == "bf16":
        ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
    elif name == "powersgd" and len(fields) == 2:
        state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=int(fields[0]),
                                            start_powerSGD_iter=int(fields[1]), use_error_feedback=True,
                                            warm_start=True)
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    else:
        raise SystemExit(f"--stock-hook '{spec}' is not one of fp16, bf16, powersgd:RANK:START_STEP")


def train(args) -> None:
    """One run: --epochs epochs of DDP (acspeed applies the stored config unless ACSPEED_DISABLE=1;
    --stock-hook: torch's hook instead); rank 0 writes [(step, wall_s, test accuracy)] with the wall
    clock stopped during evaluations, and the config acspeed applied (None: none)."""
    import torch  # noqa: PLC0415
    import torch.distributed as dist  # noqa: PLC0415
    import acspeed  # noqa: F401, PLC0415 - the one line; ACSPEED_DISABLE=1 turns it off
    from acspeed import _patch  # noqa: PLC0415 - to record the config the run applied
    import digits  # noqa: PLC0415

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    net, _ = getattr(digits, args.model.partition(":")[2])(seed=args.seed)  # same on every rank, others per seed
    # torch's powerSGD_hook runs on gloo only with the whole model in one bucket (64 MiB: DDP caps its
    # first bucket at the same size; bench/runtime/hooks_vs_stock.py); every other run: DDP's defaults.
    one_bucket = {"bucket_cap_mb": 64} if (args.stock_hook or "").startswith("powersgd") else {}
    ddp = torch.nn.parallel.DistributedDataParallel(net, **one_bucket)
    state = _patch.state_of(ddp)  # None: DDP runs without acspeed's hook (disabled, or a hookless config)
    applied = json.loads(state.config.to_json()) if state is not None else None
    if args.stock_hook:
        if applied is not None:
            raise SystemExit("--stock-hook needs ACSPEED_DISABLE=1: acspeed registered its own hook")
        register_stock_hook(ddp, args.stock_hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    steps_per_epoch = sum(1 for _ in digits.epoch_batches(rank, world, args.batch_size, 0))
    schedule = (torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs * steps_per_epoch)
                if args.schedule == "cosine" else None)
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
            if schedule is not None:
                schedule.step()
            clock = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
            dist.all_reduce(clock, op=dist.ReduceOp.MAX)  # a step lasts as long as its slowest rank
            wall += clock.item()
            step += 1
            if step % args.eval_every == 0:
                curve.append((step, wall, accuracy()))
    curve.append((step, wall, accuracy()))
    if rank == 0:
        pathlib.Path(args.json).write_text(json.dumps({"seed": args.seed, "applied": applied,
                                                       "stock_hook": args.stock_hook, "curve": curve}))
    dist.destroy_process_group()


def first_reaching(curve, target: float):
    """(step, wall_s) of the first evaluation at or above target, or None."""
    return next(((step, wall) for step, wall, acc in curve if acc >= target), None)


def numerics_of(config: dict) -> tuple:
    """What changes the math of a config: (compression, PowerSGD rank or None)."""
    return (config["compression"], config.get("powersgd_rank") if config["compression"] == "powersgd" else None)


def describe_numerics(numerics: tuple) -> str:
    return numerics[0] if numerics[1] is None else f"{numerics[0]} rank {numerics[1]}"


def stock_hook_of(config: dict):
    """torch's hook for the config's math (--stock-hook), or None when it compresses nothing."""
    compression = config["compression"]
    if compression in ("fp16", "bf16"):
        return compression
    if compression == "powersgd":
        return f"powersgd:{config['powersgd_rank']}:{config['powersgd_start_step']}"
    return None


def guard_by_numerics(db: pathlib.Path) -> dict:
    """{numerics: {"passed", "reason", "inflation"}} from the session's first compressed trial of each
    numerics (the one that measured its trajectory), plus that trial's config."""
    out = {}
    with sqlite3.connect(db) as conn:
        for config_json, metrics_json in conn.execute("SELECT config_json, metrics_json FROM trials "
                                                      "WHERE role = 'search' ORDER BY ordinal"):
            config, metrics = json.loads(config_json), json.loads(metrics_json)
            key = numerics_of(config)
            if key[0] == "none" or key in out or "guard" not in metrics:
                continue
            out[key] = {"config": config, "passed": metrics["guard"].get("passed"),
                        "reason": metrics["guard"].get("reason"), "inflation": metrics.get("inflation")}
    return out


def describe_inflation(inflation) -> str:
    """The tuner's inflation (its evidence form) in a table cell."""
    if not inflation:
        return "-"
    if inflation.get("by_definition"):
        return "1 (no compression)"
    if inflation.get("kind") != "measured":
        return inflation.get("kind", "-")
    high = inflation.get("high")
    return f"{inflation['estimate']:.2f} [{inflation['low']:.2f}, {'inf' if high is None else format(high, '.2f')}]"


def ratio_interval(values):
    if len(values) < 2:
        return None
    return dict(zip(("estimate", "ci_low", "ci_high"), stats.geometric_mean_t_interval(values)))


def main() -> int:
    args = parse_args()
    if args.train:
        train(args)
        return 0
    if args.from_json:
        report(json.loads(pathlib.Path(args.from_json).read_text()), args)
        return 0
    import bench_tuner  # noqa: PLC0415 - testbed(), tune(), build_dir()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "python"), str(HERE)] +
                                        [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    work = pathlib.Path(tempfile.mkdtemp(prefix="acspeed-tta-"))
    print(f"work folder (stores, curves): {work}", flush=True)
    db = work / "tta.db"
    if args.db:
        shutil.copyfile(args.db, db)
        tuned = {"reused_store": str(pathlib.Path(args.db).resolve())}
    else:
        tune_args = argparse.Namespace(profile=args.profile, model=args.model, precision="fp32", image_size=32,
                                       batch_size=args.batch_size, seed=1,
                                       tune_args=args.tune_args + " --data digits:batches")
        tuned = bench_tuner.tune(tune_args, db, "auto", env)
    with sqlite3.connect(db) as conn:
        config_json, evidence_json, note = conn.execute("SELECT config_json, evidence_json, note FROM decisions "
                                                        "WHERE active = 1 ORDER BY id DESC LIMIT 1").fetchone()
    stored, evidence = json.loads(config_json), json.loads(evidence_json)
    guard = guard_by_numerics(db)
    print(json.dumps(tuned, indent=2), f"decision: {note}", sep="\n", flush=True)

    from acspeed import _runtime  # noqa: PLC0415

    def applied(fields: dict):
        """What a run of this config records as applied (train()): its normalised JSON, None when
        acspeed registers no hook for it."""
        config = _runtime.core().CommConfig.from_json(json.dumps(fields))[0]
        return json.loads(config.to_json()) if config.needs_comm_hook() else None

    def run_file(name: str, seed: int) -> pathlib.Path:
        return work / f"{name.replace(' ', '_')}-{seed}.json"

    arms = {"plain": {"env": "ACSPEED_DISABLE=1", "flags": "", "applied": None},
            "tuned": {"env": f"ACSPEED_DB={shlex.quote(str(db))}", "flags": "", "applied": applied(stored)}}
    if stock_hook_of(stored):
        arms["torch"] = {"env": "ACSPEED_DISABLE=1", "flags": f"--stock-hook {stock_hook_of(stored)}",
                         "applied": None}
    for key, verdict in ({} if args.no_others else guard).items():
        if key == numerics_of(stored):
            continue
        forced = dict(stored, compression=key[0], powersgd_rank=verdict["config"]["powersgd_rank"],
                      powersgd_start_step=verdict["config"]["powersgd_start_step"])
        path = work / f"forced-{len(arms)}.json"
        path.write_text(json.dumps(forced))
        arms[describe_numerics(key)] = {"env": f"ACSPEED_CONFIG={shlex.quote(str(path))}", "flags": "",
                                        "applied": applied(forced), "forced": forced}
    run = (f"{shlex.quote(sys.executable)} -m torch.distributed.run --nnodes \"$NNODES\" --node_rank \"$NODE_RANK\" "
           f"--nproc_per_node 1 --master_addr \"$MASTER_ADDR\" --master_port \"$MASTER_PORT\" "
           f"{shlex.quote(str(pathlib.Path(__file__).resolve()))} --train --model {args.model} --epochs {args.epochs} "
           f"--eval-every {args.eval_every} --batch-size {args.batch_size} --lr {args.lr} "
           f"--schedule {args.schedule}")
    names = list(arms)
    lines = ["set -e"]
    for seed in range(1, args.seeds + 1):
        shift = (seed - 1) % len(names)
        for name in names[shift:] + names[:shift]:  # each arm in another position on every seed
            lines.append(f"{arms[name]['env']} {run} {arms[name]['flags']} --seed {seed} "
                         f"--json {shlex.quote(str(run_file(name, seed)))}")
    bench_tuner.testbed(args.profile, "\n".join(lines), env, timeout=12 * 3600)

    runs = {}
    for name in names:
        for seed in range(1, args.seeds + 1):
            recorded = json.loads(run_file(name, seed).read_text())
            if recorded["applied"] != arms[name]["applied"]:  # each arm ran what it claims to
                raise SystemExit(f"the {name} run of seed {seed} applied {recorded['applied']}, "
                                 f"not {arms[name]['applied']}")
            runs[f"{name}-{seed}"] = recorded["curve"]
    estimates = {name: None for name in names}
    estimates["tuned"] = (evidence.get("speedups") or {}).get("inflation")
    for key, verdict in guard.items():
        if describe_numerics(key) in estimates:  # the arms of the numerics not chosen
            estimates[describe_numerics(key)] = verdict["inflation"]
    raw = {"arms": names, "seeds": args.seeds, "curves": runs, "tuner_inflation": estimates,
           "decision_note": note, "stored_config": stored, "tuner_speedups": evidence.get("speedups"),
           "guard": {describe_numerics(k): {f: v[f] for f in ("passed", "reason", "inflation")}
                     for k, v in guard.items()},
           "forced_configs": {name: arm["forced"] for name, arm in arms.items() if "forced" in arm},
           "tuning": tuned, "args": vars(args), "commands": lines}
    report(raw, args)
    return 0


def smoothed(curve, evals: int):
    """[(step, wall_s, mean accuracy of the last `evals` evaluations)] (fewer at the start)."""
    return [(step, wall, statistics.mean(acc for _, _, acc in curve[max(0, i + 1 - evals):i + 1]))
            for i, (step, wall, _) in enumerate(curve)]


def analyse(raw: dict, smooth: int, target=None) -> dict:
    """Time to target and final accuracy per arm from the raw curves (see the module's step 3).
    Accuracy is the trailing mean of `smooth` evaluations (one test sample is 0.34 points of 297):
    an arm reaches the target at the first evaluation whose trailing mean is at or above it."""
    seeds, names, curves = range(1, raw["seeds"] + 1), raw["arms"], raw["curves"]
    smooth_curves = {key: smoothed(curve, smooth) for key, curve in curves.items()}
    target = target or min(smooth_curves[f"plain-{s}"][-1][2] for s in seeds)
    reached = {key: first_reaching(curve, target) for key, curve in smooth_curves.items()}
    arms = {}
    for name in names:
        rows, ratios, inflations = [], [], []
        for seed in seeds:
            key, plain = f"{name}-{seed}", reached[f"plain-{seed}"]
            rows.append({"seed": seed, "reached": reached[key], "final_accuracy": curves[key][-1][2],
                         "final_smoothed": smooth_curves[key][-1][2], "steps": curves[key][-1][0],
                         "mean_step_s": curves[key][-1][1] / curves[key][-1][0]})
            if reached[key] and plain:
                ratios.append(plain[1] / reached[key][1])
                inflations.append(reached[key][0] / plain[0])
        arms[name] = {"runs": rows, "reached_target": len(ratios), "time_to_target_vs_plain": ratio_interval(ratios),
                      "measured_inflation": inflations, "tuner_inflation": raw["tuner_inflation"].get(name),
                      "final_accuracy_mean": statistics.mean(r["final_accuracy"] for r in rows),
                      "final_smoothed_mean": statistics.mean(r["final_smoothed"] for r in rows),
                      "mean_step_s": statistics.mean(r["mean_step_s"] for r in rows)}
    for name in names:
        for field in ("final_accuracy", "final_smoothed"):
            arms[name][f"{field}_points_below_plain"] = 100 * (arms["plain"][f"{field}_mean"] -
                                                               arms[name][f"{field}_mean"])
            # Per seed, against plain's run of the same seed (same initial weights and batches): the
            # mean difference with a 95% Student-t interval, so "within 0.5 points" can be judged
            # against the test split's noise (one test image is 0.34 points).
            below = [100 * (p[field] - a[field]) for p, a in zip(arms["plain"]["runs"], arms[name]["runs"])]
            arms[name][f"{field}_points_below_plain_ci"] = list(stats.mean_t_interval(below)[1:])
    if "torch" in arms:  # acspeed against torch alone, for the same math
        pairs = [(reached[f"torch-{s}"], reached[f"tuned-{s}"]) for s in seeds]
        arms["tuned"]["time_to_target_vs_torch"] = ratio_interval([t[1] / a[1] for t, a in pairs if t and a])
    return {"target_accuracy": target, "smooth_evals": smooth, "arms": arms}


def points(row: dict, field: str) -> str:
    """Points below plain with the per-seed interval: "+0.45 [-0.30, +1.20]"."""
    low, high = row[f"{field}_points_below_plain_ci"]
    return f"{row[f'{field}_points_below_plain']:+.2f} [{low:+.2f}, {high:+.2f}]"


def report(raw: dict, args) -> None:
    """Analyses `raw`, writes raw + analysis to --out and prints the table."""
    analysis = analyse(raw, args.smooth_evals, args.target)
    out = new_results_file("time_to_accuracy", args.out)
    out.write_text(json.dumps({**raw, "analysis": analysis}, indent=2) + "\n")
    arms, seeds = analysis["arms"], raw["seeds"]
    print(f"target test accuracy {analysis['target_accuracy']:.4f} (trailing mean of {args.smooth_evals} "
          f"evaluations); decision: {raw['decision_note']}")
    print("| arm | time to target vs plain (95% CI) | measured inflation | tuner's inflation | final accuracy, "
          "last / trailing mean (points below plain [95% CI over seeds]) | mean step |")
    print("|---|---|---|---|---|---|")
    for name in raw["arms"]:
        row = arms[name]
        speed = row["time_to_target_vs_plain"]
        print(f"| {name} | " + (f"{speed['estimate']:.2f}x [{speed['ci_low']:.2f}, {speed['ci_high']:.2f}]"
                                 if speed and row["reached_target"] == seeds else
                                 f"reached in {row['reached_target']}/{seeds} seeds") +
              f" | {', '.join(f'{v:.2f}' for v in row['measured_inflation']) or '-'} | "
              f"{describe_inflation(row['tuner_inflation'])} | "
              f"{row['final_accuracy_mean']:.4f} ({points(row, 'final_accuracy')}) / "
              f"{row['final_smoothed_mean']:.4f} ({points(row, 'final_smoothed')}) | "
              f"{1000 * row['mean_step_s']:.0f} ms |")
    if "torch" in arms:
        print("tuned vs torch's stock hook, time to target:", arms["tuned"]["time_to_target_vs_torch"])
    print(f"raw and analysis: {out}")


if __name__ == "__main__":
    sys.exit(main())
