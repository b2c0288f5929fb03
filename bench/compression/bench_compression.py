"""Compression in the search: what the config tuned with `--compression none,fp16,powersgd` gains over
plain DDP on a slow link, and how the compressed runs converge under the convergence guard.

    python3 bench/compression/bench_compression.py            # both parts, about 25 min on 2 idle cores

1. Speed (root: network namespaces): on an `acspeed-testbed` cluster of --profile (2x1@1gbit: 2
   nodes x 1 process, each pinned to its own core, each node's link capped at 1 Gbit/s), resnet18
   (1000 classes: 46.8 MB of fp32 gradients) at 32x32, batch 16, fp32:
     a. `acspeed-tune --compression none,fp16,powersgd` (default strategy, PowerSGD ranks 1,4) into
        a fresh store (bench/tuner/bench_tuner.py's tune());
     b. examples/Pytorch_ddp_benchmark.py alternated in one cluster, --pairs times each, between
        `import acspeed` applying that decision and ACSPEED_DISABLE=1 (plain DDP), warm-up past
        PowerSGD's start step (--bench-warmup 12); speedup of a pair = plain p50 / tuned p50,
        geometric mean with a 95% Student-t interval (bench_tuner.py's benchmark()).
2. Convergence (no root): the learnable synthetic task of teacher.py (labels from a fixed, seeded
   random teacher network), 2 processes on gloo, trained 300 steps (12 warm-up + 288 timed) per
   trial by `acspeed-tune --strategy grid` over plain DDP (compression none), fp16 and PowerSGD
   ranks 1 and 4: every trial's loss curve, the convergence guard's verdict and its evidence are
   read from the store; the HTML report of that session (`acspeed-tune report --format html`)
   plots the curves side by side. A second session runs the same grid over none and fp16 with
   the tests' deliberately harmful compressor (`teacher:corrupted_task`: the fp16 path's averaged
   gradients replaced by noise of their norm), whose verdict must be a fail.
Writes --out (JSON) and the report, and prints Markdown tables for RESULTS.md.
"""
import argparse
import json
import os
import pathlib
import sqlite3
import statistics
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "bench" / "tuner"))
import bench_tuner  # noqa: E402 - tune(), benchmark(), build_dir()
import stats  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="2x1@1gbit")
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--tune-args", default="--compression none,fp16,powersgd --bucket-mb 5,25 "
                        "--algorithms allreduce,reduce_scatter,hierarchical --streams 1,2 --warmup 12 --steps 6 "
                        "--repeats 3", help="search space and trial options of the speed part's tuning session")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=5, help="benchmark (tuned, plain) pairs, >= 5 for the figure")
    parser.add_argument("--bench-steps", type=int, default=10)
    parser.add_argument("--bench-warmup", type=int, default=12, help="past PowerSGD's start step (10)")
    parser.add_argument("--convergence-steps", type=int, default=300, help="steps per convergence trial")
    parser.add_argument("--convergence-batch", type=int, default=128, help="samples per rank")
    parser.add_argument("--skip-speed", action="store_true", help="only the convergence part (no root needed)")
    parser.add_argument("--skip-convergence", action="store_true")
    parser.add_argument("--out", default=str(HERE / "results" / "results.json"))
    parser.add_argument("--report", default=str(HERE / "results" / "convergence.html"))
    return parser.parse_args()


def speed(args, env: dict, work: pathlib.Path) -> dict:
    args.skip_grid = True
    tuned = bench_tuner.tune(args, work / "speed.db", "auto", env)
    print(json.dumps(tuned, indent=2), flush=True)
    pairs = bench_tuner.benchmark(args, work / "speed.db", env, work)
    ratios = [plain / compressed for compressed, plain in pairs]
    speedup, low, high = stats.geometric_mean_t_interval(ratios)
    with sqlite3.connect(work / "speed.db") as conn:
        trials = [{"config": json.loads(c), "status": s, "error": e, "metrics": json.loads(m)}
                  for c, s, e, m in conn.execute("SELECT config_json, status, error, metrics_json FROM trials "
                                                 "WHERE role = 'search' ORDER BY ordinal")]
    return {"tuning": tuned, "search_trials": trials,
            "benchmark": {"pairs": [{"tuned_p50_s": t, "plain_p50_s": p} for t, p in pairs],
                          "speedup": speedup, "ci_low": low, "ci_high": high,
                          "tuned_p50_s": statistics.median(t for t, _ in pairs),
                          "plain_p50_s": statistics.median(p for _, p in pairs)}}


def _convergence_session(args, env: dict, db: pathlib.Path, model: str, compression: str) -> tuple:
    """One grid session of the convergence task; (command, {run name: its trial}, session id)."""
    tune = bench_tuner.build_dir() / "bin" / "acspeed-tune"
    warmup = 12
    command = [str(tune), "--db", str(db), "--model", model, "--batch-size", str(args.convergence_batch),
               "--nproc-per-node", "2", "--compression", compression,
               "--algorithms", "allreduce", "--streams", "1", "--bucket-mb", "25", "--strategy", "grid",
               "--warmup", str(warmup), "--steps", str(args.convergence_steps - warmup), "--repeats", "3",
               "--budget-minutes", "0", "--trial-timeout", "1200", "--seed", str(args.seed)]
    if "powersgd" in compression:
        command += ["--powersgd-ranks", "1,4"]
    subprocess.run(command, env=env, check=True, timeout=3 * 3600)
    runs = {}
    with sqlite3.connect(db) as conn:
        session = conn.execute("SELECT max(id) FROM sessions").fetchone()[0]
        for config_json, status, error, metrics_json in conn.execute(
                "SELECT config_json, status, error, metrics_json FROM trials WHERE role = 'search' AND session_id = ? "
                "ORDER BY ordinal", (session,)):
            config, metrics = json.loads(config_json), json.loads(metrics_json)
            name = config["compression"] if config["compression"] != "powersgd" else f"powersgd rank {config['powersgd_rank']}"
            runs[name] = {"status": status, "error": error, "losses": metrics.get("losses", []),
                          "guard": metrics.get("guard"), "p50_s": metrics.get("p50_s"),
                          "compression_s": metrics.get("compression_s")}
    return command, runs, session


def convergence(args, env: dict, work: pathlib.Path) -> dict:
    db = work / "convergence.db"
    tune = bench_tuner.build_dir() / "bin" / "acspeed-tune"
    env = dict(env, PYTHONPATH=os.pathsep.join([str(HERE), str(REPO / "tests" / "tuner"), env["PYTHONPATH"]]))
    command, runs, session = _convergence_session(args, env, db, "teacher:task", "none,fp16,powersgd")
    with sqlite3.connect(db) as conn:
        decision = conn.execute("SELECT config_json, note FROM decisions WHERE active = 1").fetchone()
    pathlib.Path(args.report).parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(tune), "--db", str(db), "report", "--session", str(session), "--format", "html",
                    "-o", args.report, "--force"], env=env, check=True)
    # the harmful compressor: its own store (its decision must not touch the first one's)
    corrupted_command, corrupted, _ = _convergence_session(args, env, work / "convergence-corrupted.db",
                                                           "teacher:corrupted_task", "none,fp16")
    runs["corrupting compressor"] = corrupted["fp16"]
    return {"runs": runs, "decision": {"config": json.loads(decision[0]), "note": decision[1]}, "report": args.report,
            "command": command, "corrupting_command": corrupted_command,
            "corrupting_reference_matches": corrupted["none"]["losses"] == runs["none"]["losses"]}


def main():
    args = parse_args()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "python")] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                                                    if p])
    env.pop("ACSPEED_DISABLE", None)
    work = pathlib.Path(tempfile.mkdtemp(prefix="acspeed-bench-compression-"))
    load = os.getloadavg()
    results = {"command": sys.argv, "profile": args.profile, "model": args.model, "image_size": args.image_size,
               "batch_size": args.batch_size, "tune_args": args.tune_args, "seed": args.seed,
               "load_average_at_start": load}
    if not args.skip_speed:
        results["speed"] = speed(args, env, work)
    if not args.skip_convergence:
        results["convergence"] = convergence(args, env, work)
    results["load_average_at_end"] = os.getloadavg()
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.out).write_text(json.dumps(results, indent=2) + "\n")

    print(f"\nload average (1, 5, 15 min): at start {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}, at end "
          f"{results['load_average_at_end'][0]:.1f}")
    if "speed" in results:
        b = results["speed"]["benchmark"]
        d = results["speed"]["tuning"]["decision"]
        print("\n| link profile | model | plain DDP p50 | tuned p50 | tuned config | speedup (95% CI) |")
        print("|---|---|---|---|---|---|")
        print(f"| {args.profile} | {args.model} {args.image_size}px b{args.batch_size} | {b['plain_p50_s']:.3f} s | "
              f"{b['tuned_p50_s']:.3f} s | {json.dumps(d['config'])} | {b['speedup']:.2f}x [{b['ci_low']:.2f}, "
              f"{b['ci_high']:.2f}] ({len(b['pairs'])} pairs) |")
        print("\n| search trial | status | p50 | PowerSGD compute | guard |")
        print("|---|---|---|---|---|")
        for t in results["speed"]["search_trials"]:
            m, g = t["metrics"], t["metrics"].get("guard")
            verdict = "-" if not g else ("pass" if g["passed"] else "fail: " + g.get("reason", ""))
            print(f"| {json.dumps(t['config'])} | {t['status']} | {m.get('p50_s', 0):.3f} s | "
                  f"{m.get('compression_s') or 0:.4f} s | {verdict} |")
    if "convergence" in results:
        print("\n| run | loss first | loss at step 150 | final loss | tail excess / allowed | fidelity cosine / norm error "
              "| guard |")
        print("|---|---|---|---|---|---|---|")
        for name, run in results["convergence"]["runs"].items():
            losses, g = run["losses"], run["guard"]
            fidelity = g["fidelity"] if g else {}
            loss = g["loss"] if g else {}
            print(f"| {name} | {losses[0]:.4f} | {losses[len(losses) // 2]:.4f} | {losses[-1]:.4f} | "
                  + (f"{loss['excess']:+.4f} / {loss['allowed']:.4f} | {fidelity.get('cosine', float('nan')):.4f} / "
                     f"{fidelity.get('norm_error', float('nan')):.4f} | {'pass' if g['passed'] else 'fail'} |"
                     if g else "- | - | reference |"))
        print(f"\nplot: {results['convergence']['report']}")
    print(f"results: {args.out}; stores in {work}")


if __name__ == "__main__":
    main()
