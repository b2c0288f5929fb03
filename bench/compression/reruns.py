"""Does `acspeed-tune --compression none,fp16,powersgd` store the same numerics family run after run,
and what does the stored decision give? (issue 39 item 4)

    bench/quiet_run.sh python3 bench/compression/reruns.py seed --runs 3     # ~20-25 min a run
    bench/quiet_run.sh python3 bench/compression/reruns.py tta --runs 2      # ~23 min a run
    python3 bench/compression/reruns.py --from FILE                          # the table again

seed: the issue's command as a user types it (default budget, seed and search space) on
`acspeed-testbed run 2x1@1gbit --pin`: resnet18 32x32 with its 1000-class head, batch 16, fp32, the
tuner's synthetic data; a fresh store each run. Then the seed benchmark (examples/Pytorch_ddp_benchmark.py,
its default warm-up) alternated in one cluster between `import acspeed` with that store and
ACSPEED_DISABLE=1, --pairs pairs: speedup = plain p50 / tuned p50, geometric mean, 95% Student-t interval.
tta: the tune step of bench_time_to_accuracy.py (--model digits:model10, --data digits:batches, its own
search space and seed) into a fresh store each run; its training part is that script's.

Per run: the stored numerics family (compression, PowerSGD rank), the decision's line, the
session's wall time, the guard's lines of the tuner's output (extended verdicts, budget, cost), and
from the store each family's last verdict (loss check, inflation, extended from/to and why).
Writes --out (JSON, every run's tuner output included) and prints a Markdown table.
Needs root (network namespaces) and a build folder (ACSPEED_BUILD_DIR, default build/).
"""
import argparse
import json
import os
import pathlib
import shlex
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tuner")]  # bench/stats.py, bench_tuner.py
import bench_tuner  # noqa: E402
import stats  # noqa: E402
import bench_time_to_accuracy as tta  # noqa: E402

# What the tuner prints about the guard and its budget (kept per run, verbatim).
GUARD_WORDS = ("guard", "budget", "extended", "inflation", "certified", "not run", "fall")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs="?", choices=("seed", "tta"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=3, help="seed: benchmark (tuned, plain) pairs per run")
    parser.add_argument("--bench-steps", type=int, default=10, help="seed: timed steps per benchmark run")
    parser.add_argument("--from", dest="from_json", help="print the table of a result this script wrote")
    parser.add_argument("--out", help="JSON (default: results/reruns_<command>_<UTC time>.json; never written over)")
    args = parser.parse_args()
    if not args.from_json and args.command is None:
        parser.error("give a command (seed or tta) or --from FILE")
    if args.runs < 1 or args.pairs < 1:
        parser.error(f"--runs {args.runs} and --pairs {args.pairs} must be >= 1")
    return args


def tune_seed(db: pathlib.Path, env: dict) -> str:
    """The issue's command, word for word but the store; returns the tuner's output (also in
    tune.log beside the store while it runs)."""
    tune = bench_tuner.build_dir() / "bin" / "acspeed-tune"
    script = (f"{shlex.quote(str(tune))} --db {shlex.quote(str(db))} --model resnet18 --image-size 32 "
              "--batch-size 16 --precision fp32 --nproc-per-node 1 --nnodes \"$NNODES\" --node-rank \"$NODE_RANK\" "
              "--master-addr \"$MASTER_ADDR\" --master-port \"$MASTER_PORT\" --compression none,fp16,powersgd")
    testbed = bench_tuner.build_dir() / "bin" / "acspeed-testbed"
    log = db.parent / "tune.log"
    with log.open("w") as out:
        subprocess.run([str(testbed), "run", "2x1@1gbit", "--pin", "--", "sh", "-c", script], env=env,
                       check=True, timeout=3 * 3600, stdout=out, stderr=subprocess.STDOUT)
    return log.read_text()


def tune_tta(db: pathlib.Path, env: dict) -> str:
    """bench_time_to_accuracy.py's tune step (its defaults, --model digits:model10)."""
    args = argparse.Namespace(profile="2x1@1gbit", model="digits:model10", precision="fp32", image_size=32,
                              batch_size=16, seed=1, tune_args=tta.TUNE_ARGS + " --data digits:batches")
    return json.dumps(bench_tuner.tune(args, db, "auto", env), indent=2)


def decision(db: pathlib.Path) -> dict:
    with sqlite3.connect(db) as conn:
        config, note = conn.execute("SELECT config_json, note FROM decisions WHERE active = 1 "
                                    "ORDER BY id DESC LIMIT 1").fetchone()
    config = json.loads(config)
    return {"config": config, "family": family_of(config), "note": note}


def family_of(config: dict) -> str:
    """A config's numerics family: its compression, with the rank for PowerSGD."""
    family = config.get("compression", "none")
    return family + f" rank {config.get('powersgd_rank')}" if family == "powersgd" else family


def guard_verdicts(db: pathlib.Path) -> dict:
    """Per numerics family, the guard's last verdict in the store (the latest judged trial: an
    extension's run carries the verdict on the longer trajectories): passed, the loss check's
    figures, the inflation, and how the trajectories were extended and why."""
    verdicts = {}
    with sqlite3.connect(db) as conn:
        for config, metrics in conn.execute("SELECT config_json, metrics_json FROM trials ORDER BY ordinal"):
            config, metrics = json.loads(config), json.loads(metrics or "{}")
            guard = metrics.get("guard")
            if not isinstance(guard, dict) or "passed" not in guard:
                continue
            loss = guard.get("loss", {})
            verdicts[family_of(config)] = {"passed": guard["passed"], "undecided": guard.get("undecided"),
                                "reason": guard.get("reason"), "trajectory_steps": guard.get("trajectory_steps"),
                                "loss": {k: loss.get(k) for k in ("excess", "allowed", "noise", "within_noise")},
                                "inflation": metrics.get("inflation"), "extended": guard.get("extended")}
    return verdicts


def run(args) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(bench_tuner.REPO / "python"), str(HERE)] +
                                        [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    runs = []
    for index in range(args.runs):
        work = pathlib.Path(tempfile.mkdtemp(prefix=f"acspeed-reruns-{args.command}-"))
        db = work / "store.db"
        start = time.monotonic()
        output = (tune_seed if args.command == "seed" else tune_tta)(db, env)
        entry = {"run": index + 1, "tune_minutes": (time.monotonic() - start) / 60, **decision(db),
                 "verdicts": guard_verdicts(db),
                 "guard_lines": [line for line in output.splitlines()
                                 if any(word in line.lower() for word in GUARD_WORDS)],
                 "tuner_output": output}
        if args.command == "seed":
            bench = argparse.Namespace(profile="2x1@1gbit", model="resnet18", precision="fp32", image_size=32,
                                       batch_size=16, pairs=args.pairs, bench_warmup=None,
                                       bench_steps=args.bench_steps)
            pairs = bench_tuner.benchmark(bench, db, env, work)
            speedup, low, high = stats.geometric_mean_t_interval([plain / tuned for tuned, plain in pairs])
            entry["benchmark"] = {"pairs": [{"tuned_p50_s": t, "plain_p50_s": p} for t, p in pairs],
                                  "speedup": speedup, "ci_low": low, "ci_high": high}
        print(f"run {index + 1}: {entry['family']} ({entry['tune_minutes']:.1f} min)"
              + (f", {entry['benchmark']['speedup']:.2f}x" if "benchmark" in entry else ""), flush=True)
        runs.append(entry)
    return {"command": args.command, "runs": runs}


def table(result: dict) -> str:
    lines = [f"| run | stored numerics | tune minutes | seed benchmark vs plain [95% CI] | decision |",
             "|---|---|---|---|---|"]
    for entry in result["runs"]:
        bench = entry.get("benchmark")
        speed = f"{bench['speedup']:.2f}x [{bench['ci_low']:.2f}, {bench['ci_high']:.2f}]" if bench else "-"
        lines.append(f"| {entry['run']} | {entry['family']} | {entry['tune_minutes']:.1f} | {speed} | "
                     f"{entry['note']} |")
    lines.append("")
    for entry in result["runs"]:
        for family, v in entry.get("verdicts", {}).items():
            loss, extended = v["loss"], v.get("extended")
            verdict = "pass" if v["passed"] else "undecided" if v.get("undecided") else "fail"
            line = (f"- run {entry['run']}, {family}: {verdict} on {v['trajectory_steps']} steps, loss "
                    f"{loss['excess']:+.4g} (allowed {loss['allowed']:.4g}, noise {loss.get('noise') or 0:.3g})")
            inflation = v.get("inflation") or {}
            if inflation.get("kind") == "measured":
                high = inflation.get("high")
                line += (f", inflation {inflation['estimate']:.2f}x [{inflation['low']:.2f}, "
                         f"{'inf' if high is None else f'{high:.2f}'}]")
            if extended:
                line += f"; extended from {extended['from_steps']} to {extended['to_steps']} steps: {extended['why']}"
                if extended.get("declined"):
                    line += f" (declined: {extended['declined']})"
            lines.append(line)
    families = {entry["family"] for entry in result["runs"]}
    lines.append("")
    lines.append(f"{len(result['runs'])} runs of `{result['command']}`: "
                 + ("the same numerics family every time" if len(families) == 1 else
                    f"{len(families)} different families: {', '.join(sorted(families))}"))
    return "\n".join(lines)


def main() -> int:
    args = parse_args()
    if args.from_json:
        print(table(json.loads(pathlib.Path(args.from_json).read_text())))
        return 0
    result = run(args)
    out = tta.new_results_file(f"reruns_{args.command}", args.out)
    out.write_text(json.dumps(result, indent=2))
    print(table(result))
    print(f"raw: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
