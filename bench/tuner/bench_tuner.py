"""acspeed-tune on the emulated cluster: what the search costs and what the tuned config gains.

    python3 bench/tuner/bench_tuner.py --profile 2x1@1gbit --model resnet18 --image-size 32 --batch-size 16

In one run, on `acspeed-testbed` clusters of the given profile (nodes in network namespaces, the
inter-node link capped):
  1. `acspeed-tune` with the default strategy (coordinate descent) into store A: trials, minutes;
  2. `acspeed-tune --strategy grid` (the exhaustive search) into store B: trials, minutes, its best;
  3. the benchmark example (examples/Pytorch_ddp_benchmark.py) alternated, in one cluster, between
     `import acspeed` applying store A's decision and ACSPEED_DISABLE=1 (plain DDP), --pairs times;
     speedup of a pair = default p50 / tuned p50; geometric mean with a 95% Student-t interval.
Writes the figures to --out (JSON) and prints a Markdown table for RESULTS.md.
Needs root (network namespaces) and a build folder (ACSPEED_BUILD_DIR, default build/).
"""
import argparse
import json
import os
import pathlib
import shlex
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # bench/stats.py
import stats  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="2x1@1gbit")
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--tune-args", default="--bucket-mb 5,25,100 --algorithms allreduce,reduce_scatter,hierarchical "
                        "--streams 1,2 --compression none,fp16 --warmup 2 --steps 6 --repeats 3",
                        help="search space and trial options given to both searches ('' for acspeed-tune's defaults)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=5, help="benchmark (tuned, default) pairs")
    parser.add_argument("--bench-steps", type=int, default=10)
    parser.add_argument("--bench-warmup", type=int, default=3, help="benchmark warm-up steps")
    parser.add_argument("--skip-grid", action="store_true", help="only the default strategy")
    parser.add_argument("--out", default=str(REPO / "bench" / "tuner" / "results.json"))
    return parser.parse_args()


def build_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("ACSPEED_BUILD_DIR", REPO / "build")).resolve()


def testbed(profile: str, script: str, env: dict, timeout: int) -> float:
    """Runs `sh -c script` once in every node of a fresh cluster, each node pinned to its own cores
    (unpinned, the two nodes' gloo threads fight over the 2 cores and plain DDP's step time swings by
    3x, which would flatter the tuned side); returns the wall time."""
    start = time.monotonic()
    subprocess.run([str(build_dir() / "bin" / "acspeed-testbed"), "run", profile, "--pin", "--",
                    "sh", "-c", script],
                   env=env, check=True, timeout=timeout)
    return time.monotonic() - start


def tune(args, db: pathlib.Path, strategy: str, env: dict) -> dict:
    tune_bin = build_dir() / "bin" / "acspeed-tune"
    command = [str(tune_bin), "--db", str(db), "--model", args.model, "--precision", args.precision,
               "--image-size", str(args.image_size), "--batch-size", str(args.batch_size), "--nproc-per-node", "1",
               "--strategy", strategy, "--seed", str(args.seed), "--trial-timeout", "600",
               "--budget-minutes", "0", *shlex.split(args.tune_args)]
    script = (" ".join(shlex.quote(c) for c in command)
              + ' --nnodes "$NNODES" --node-rank "$NODE_RANK" --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT"')
    wall = testbed(args.profile, script, env, timeout=4 * 3600)
    with sqlite3.connect(db) as conn:
        trials = conn.execute("SELECT role, count(*) FROM trials GROUP BY role").fetchall()
        decision = conn.execute("SELECT config_json, speedup, ci_low, ci_high, note FROM decisions WHERE active = 1 "
                                "ORDER BY id DESC LIMIT 1").fetchone()
        best = conn.execute("SELECT config_json, json_extract(metrics_json, '$.p50_s') AS p50 FROM trials "
                            "WHERE role = 'search' AND status = 'ok' ORDER BY p50 LIMIT 1").fetchone()
        measured = conn.execute("SELECT role, config_json, status, json_extract(metrics_json, '$.p50_s') FROM trials "
                                "ORDER BY ordinal").fetchall()
    counts = dict(trials)
    # The step model's view of the session: each config's flow count, the link fitted per flow count.
    predicted = subprocess.run([str(tune_bin), "--db", str(db), "predict", "--latest", "--json"], env=env,
                               check=True, capture_output=True, text=True).stdout
    return {"strategy": strategy, "predict": json.loads(predicted), "minutes": wall / 60, "search_trials": counts.get("search", 0),
            "trials": [{"role": role, "config": json.loads(config), "status": status, "p50_s": p50}
                       for role, config, status, p50 in measured],
            "decision_trials": counts.get("candidate", 0) + counts.get("baseline", 0),
            "best_search_config": json.loads(best[0]), "best_search_p50_s": best[1],
            "decision": {"config": json.loads(decision[0]), "speedup": decision[1], "ci_low": decision[2],
                         "ci_high": decision[3], "note": decision[4]}}


def benchmark(args, db: pathlib.Path, env: dict, out_dir: pathlib.Path) -> list:
    """Alternates tuned / default benchmark runs inside one cluster; returns [(tuned, default)] p50s."""
    bench = REPO / "examples" / "Pytorch_ddp_benchmark.py"
    run = (f"{shlex.quote(sys.executable)} -m torch.distributed.run --nnodes \"$NNODES\" --node_rank \"$NODE_RANK\" "
           f"--nproc_per_node 1 --master_addr \"$MASTER_ADDR\" --master_port \"$MASTER_PORT\" {shlex.quote(str(bench))} "
           f"--model {shlex.quote(args.model)} --precision {args.precision} --image-size {args.image_size} "
           f"--batch-size {args.batch_size} --steps {args.bench_steps} --overwrite"
           + ("" if args.bench_warmup is None else f" --warmup {args.bench_warmup}"))  # None: the example's own
    lines = ["set -e"]
    for i in range(args.pairs):
        order = [("tuned", ""), ("default", "ACSPEED_DISABLE=1 ")] if i % 2 == 0 else \
                [("default", "ACSPEED_DISABLE=1 "), ("tuned", "")]
        for name, prefix in order:
            out = out_dir / f"{name}-{i}-node$NODE_RANK.json"
            lines.append(f"{prefix}ACSPEED_DB={shlex.quote(str(db))} {run} --json \"{out}\"")
    testbed(args.profile, "\n".join(lines), env, timeout=4 * 3600)
    pairs = []
    for i in range(args.pairs):
        p50 = {}
        for name in ("tuned", "default"):
            record = json.loads((out_dir / f"{name}-{i}-node0.json").read_text())
            assert record["acspeed"] is True
            p50[name] = record["percentiles"]["p50"]["step_time_s"]
        pairs.append((p50["tuned"], p50["default"]))
    return pairs


def main():
    args = parse_args()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "python")] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.pop("ACSPEED_DISABLE", None)
    work = pathlib.Path(tempfile.mkdtemp(prefix="acspeed-bench-tuner-"))
    results = {"profile": args.profile, "model": args.model, "precision": args.precision,
               "image_size": args.image_size, "batch_size": args.batch_size, "tune_args": args.tune_args,
               "seed": args.seed, "command": sys.argv}
    results["default_strategy"] = tune(args, work / "descent.db", "auto", env)
    print(json.dumps(results["default_strategy"], indent=2), flush=True)
    if not args.skip_grid:
        results["grid"] = tune(args, work / "grid.db", "grid", env)
        print(json.dumps(results["grid"], indent=2), flush=True)
    pairs = benchmark(args, work / "descent.db", env, work)
    ratios = [default / tuned for tuned, default in pairs]
    speedup, low, high = stats.geometric_mean_t_interval(ratios)
    results["benchmark"] = {"pairs": [{"tuned_p50_s": t, "default_p50_s": d} for t, d in pairs],
                            "speedup": speedup, "ci_low": low, "ci_high": high,
                            "tuned_samples_per_s": args.batch_size / statistics.median(t for t, _ in pairs),
                            "default_samples_per_s": args.batch_size / statistics.median(d for _, d in pairs)}
    pathlib.Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    b = results["benchmark"]
    print(f"\n| link profile | model | default DDP p50 | tuned p50 | speedup (95% CI) |")
    print("|---|---|---|---|---|")
    print(f"| {args.profile} | {args.model} {args.image_size}px b{args.batch_size} | "
          f"{statistics.median(d for _, d in pairs):.3f} s ({b['default_samples_per_s']:.1f}/s) | "
          f"{statistics.median(t for t, _ in pairs):.3f} s ({b['tuned_samples_per_s']:.1f}/s) | "
          f"{speedup:.2f}x [{low:.2f}, {high:.2f}] |")
    print("\n| search | trials (search + decision) | minutes | best config found |")
    print("|---|---|---|---|")
    for key in ("default_strategy", "grid"):
        if key in results:
            r = results[key]
            print(f"| {r['strategy']} | {r['search_trials']} + {r['decision_trials']} | {r['minutes']:.1f} | "
                  f"{json.dumps(r['best_search_config'])} ({r['best_search_p50_s']:.3f} s) |")
    print(f"\nresults: {args.out}; stores and benchmark JSON in {work}")


if __name__ == "__main__":
    main()
