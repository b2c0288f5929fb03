"""The step model against the testbed: calibrate once, predict other links, measure them.

    python3 bench/model/bench_model.py            # the full run (about 25 minutes on the 2-core machine)
    python3 bench/model/bench_model.py --smoke    # 1 launch per figure, 2 links (about 8 minutes)

In one run (root: network namespaces; a build folder, ACSPEED_BUILD_DIR, default build/):
  1. calibrate: `acspeed-tune --strategy grid` on `acspeed-testbed 2x1@1gbit` (2 nodes x 1 process, each
     node pinned to its own core) over --tune-args; the session runs the step model's compute-only and
     calibration trials itself;
  2. predict: `acspeed-tune predict --session N --link ... --json` for DDP defaults and the tuned config
     (the session's decision; when it keeps DDP defaults, the fastest search config) at every --links
     and --model-links rate, and `--nnodes 2 --nproc-per-node 2` at 1 Gbit;
  3. measure: examples/Pytorch_ddp_benchmark.py on a fresh cluster per link (2x1@RATE) and on 2x2@1gbit
     (2 processes per node sharing the node's core), --launches launches per (config, link), the two
     configs alternated; DDP defaults = ACSPEED_DISABLE=1, tuned = ACSPEED_CONFIG=the config's JSON;
     a figure = the median over launches of each launch's p50 step (max over ranks);
  4. error = (predicted - measured) / measured; mean absolute and worst over the 2x1 figures.
Writes --out (JSON) and prints the Markdown table for RESULTS.md.
"""
import argparse
import datetime
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

REPO = pathlib.Path(__file__).resolve().parents[2]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--calibration-link", default="1gbit")
    parser.add_argument("--links", default="500mbit,1gbit,1500mbit,2gbit", help="predicted and measured")
    parser.add_argument("--model-links", default="5gbit,10gbit", help="predicted only (the emulated link is "
                        "CPU-bound above about 2 Gbit/s here)")
    parser.add_argument("--tune-args", default="--bucket-mb 5,25 --algorithms allreduce,reduce_scatter --streams 1,2 "
                        "--compression none,fp16 --warmup 2 --steps 6 --repeats 3")
    parser.add_argument("--launches", type=int, default=3, help="benchmark launches per (config, link)")
    parser.add_argument("--bench-steps", type=int, default=10)
    parser.add_argument("--no-2x2", action="store_true", help="skip the 2 nodes x 2 processes check")
    parser.add_argument("--smoke", action="store_true", help="1 launch, links 500mbit,1gbit, no 2x2")
    parser.add_argument("--out", help="default: bench/model/results/<UTC date and time>.json")
    args = parser.parse_args()
    if args.smoke:
        args.launches, args.links, args.no_2x2 = 1, "500mbit,1gbit", True
    return args


def build_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("ACSPEED_BUILD_DIR", REPO / "build")).resolve()


def testbed(profile: str, script: str, env: dict, timeout: int = 3 * 3600) -> None:
    subprocess.run([str(build_dir() / "bin" / "acspeed-testbed"), "run", profile, "--pin", "--", "sh", "-c", script],
                   env=env, check=True, timeout=timeout)


def calibrate(args, db: pathlib.Path, env: dict) -> int:
    command = [str(build_dir() / "bin" / "acspeed-tune"), "--db", str(db), "--model", args.model,
               "--image-size", str(args.image_size), "--batch-size", str(args.batch_size), "--nproc-per-node", "1",
               "--strategy", "grid", "--seed", "1", "--trial-timeout", "600", "--budget-minutes", "0",
               *shlex.split(args.tune_args)]
    script = (" ".join(shlex.quote(c) for c in command)
              + ' --nnodes "$NNODES" --node-rank "$NODE_RANK" --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT"')
    testbed(f"2x1@{args.calibration_link}", script, env)
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT max(id) FROM sessions").fetchone()[0]


def tuned_config(db: pathlib.Path, session: int) -> tuple:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT config_json FROM decisions WHERE session_id = ? ORDER BY id DESC LIMIT 1",
                           (session,)).fetchone()
        config = json.loads(row[0])
        if config.get("algorithm") == "allreduce" and config.get("streams") == 1 and \
                config.get("compression") == "none" and config.get("bucket_cap_mb") is None:
            best = conn.execute("SELECT config_json FROM trials WHERE session_id = ? AND role = 'search' AND "
                                "status = 'ok' ORDER BY json_extract(metrics_json, '$.p50_s') LIMIT 1",
                                (session,)).fetchone()
            return json.loads(best[0]), "the fastest search config (the decision keeps DDP defaults)"
    return config, "the session's decision"


def predict(db: pathlib.Path, session: int, extra: list, env: dict) -> dict:
    out = subprocess.run([str(build_dir() / "bin" / "acspeed-tune"), "--db", str(db), "predict", "--session",
                          str(session), "--json", *extra], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def pick(predictions: dict, config: dict, baseline: bool, link_bps: int, nnodes: int):
    for p in predictions["predictions"]:
        if p["link_bits_per_s"] == link_bps and p["nnodes"] == nnodes and \
                (p["baseline"] if baseline else p["config"] == config):
            return p
    return None


def measure(args, profile: str, nproc: int, config_file: pathlib.Path, env: dict, out_dir: pathlib.Path) -> dict:
    """Median p50 of --launches launches per config, alternated, in one cluster."""
    bench = REPO / "examples" / "Pytorch_ddp_benchmark.py"
    run = (f"{shlex.quote(sys.executable)} -m torch.distributed.run --nnodes \"$NNODES\" --node_rank \"$NODE_RANK\" "
           f"--nproc_per_node {nproc} --master_addr \"$MASTER_ADDR\" --master_port \"$MASTER_PORT\" "
           f"{shlex.quote(str(bench))} --model {shlex.quote(args.model)} --image-size {args.image_size} "
           f"--batch-size {args.batch_size} --warmup 3 --steps {args.bench_steps} --overwrite")
    tag = profile.replace("@", "_").replace("/", "_")
    lines = ["set -e"]
    sides = [("defaults", "ACSPEED_DISABLE=1 "), ("tuned", f"ACSPEED_CONFIG={shlex.quote(str(config_file))} ")]
    for i in range(args.launches):
        for name, prefix in (sides if i % 2 == 0 else sides[::-1]):
            lines.append(f"{prefix}{run} --json \"{out_dir}/{tag}-{name}-{i}-node$NODE_RANK.json\"")
    testbed(profile, "\n".join(lines), env)
    result = {}
    for name, _ in sides:
        p50s = [json.loads((out_dir / f"{tag}-{name}-{i}-node0.json").read_text())["percentiles"]["p50"]["step_time_s"]
                for i in range(args.launches)]
        result[name] = {"launches_p50_s": p50s, "median_s": statistics.median(p50s)}
    return result


def modelled(p) -> dict:
    """A prediction's figures for a results row (None where the model made none)."""
    return {"predicted_s": p and p["step_s"], "bound_s": p and p["bound_s"], "cpu_floor_s": p and p.get("cpu_floor_s")}


def rate_bps(text: str) -> int:
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bit": 1}
    for unit, factor in units.items():
        if text.lower().endswith(unit):
            return int(round(float(text[: -len(unit)]) * factor))
    raise SystemExit(f"--links: '{text}' is not a rate like 500mbit or 1.5gbit")


def main():
    args = parse_args()
    started = time.monotonic()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "python")] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.pop("ACSPEED_DISABLE", None)
    env.pop("ACSPEED_CONFIG", None)
    work = pathlib.Path(tempfile.mkdtemp(prefix="acspeed-bench-model-"))
    db = work / "calibration.db"
    load_before = os.getloadavg()
    session = calibrate(args, db, env)
    config, config_source = tuned_config(db, session)
    config_file = work / "tuned.json"
    config_file.write_text(json.dumps(config))
    links = args.links.split(",")
    model_links = [link for link in args.model_links.split(",") if link]
    predictions = predict(db, session, ["--link", ",".join(links + model_links)], env)
    rows = []
    for link in links:
        measured = measure(args, f"2x1@{link}", 1, config_file, env, work)
        for name, baseline in (("defaults", True), ("tuned", False)):
            p = pick(predictions, config, baseline, rate_bps(link), 2)
            m = measured[name]["median_s"]
            rows.append({"config": name, "link": link, "nnodes": 2, "nproc_per_node": 1,
                         **modelled(p), "measured_s": m,
                         "launches_p50_s": measured[name]["launches_p50_s"],
                         "error": (p["step_s"] - m) / m if p and p["step_s"] else None})
    for link in model_links:
        for name, baseline in (("defaults", True), ("tuned", False)):
            p = pick(predictions, config, baseline, rate_bps(link), 2)
            rows.append({"config": name, "link": link, "nnodes": 2, "nproc_per_node": 1, **modelled(p),
                         "measured_s": None, "error": None, "model_only": True})
    if not args.no_2x2:
        p22 = predict(db, session, ["--link", "1gbit", "--nnodes", "2", "--nproc-per-node", "2"], env)
        measured = measure(args, "2x2@1gbit", 2, config_file, env, work)
        for name, baseline in (("defaults", True), ("tuned", False)):
            p = pick(p22, config, baseline, rate_bps("1gbit"), 2)
            m = measured[name]["median_s"]
            rows.append({"config": name, "link": "1gbit", "nnodes": 2, "nproc_per_node": 2,
                         **modelled(p), "measured_s": m,
                         "launches_p50_s": measured[name]["launches_p50_s"],
                         "error": (p["step_s"] - m) / m if p and p["step_s"] else None})
    errors = [abs(r["error"]) for r in rows if r["error"] is not None and r["nproc_per_node"] == 1]
    summary = {"mean_abs_error": statistics.mean(errors) if errors else None, "worst_abs_error": max(errors, default=None),
               "figures": len(errors)}
    results = {"command": sys.argv, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "minutes": (time.monotonic() - started) / 60, "load_average_before": load_before,
               "load_average_after": os.getloadavg(), "model": args.model, "image_size": args.image_size,
               "batch_size": args.batch_size, "tune_args": args.tune_args, "launches": args.launches,
               "calibration_session": session, "tuned_config": config, "tuned_config_source": config_source,
               "calibration": predictions["calibration"], "notes": predictions["notes"], "rows": rows,
               "summary_2x1": summary}
    out = pathlib.Path(args.out) if args.out else (REPO / "bench" / "model" / "results" /
                                                   f"{datetime.datetime.utcnow():%Y%m%d-%H%M}.json")
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\ncalibrated on 2x1@{args.calibration_link} (session {session}); tuned = {config_source}: {json.dumps(config)}")
    print("\n| config | link | nodes x procs | predicted (ms) | bound (ms) | CPU floor (ms) | measured (ms, median of "
          "launches) | error |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        fmt = lambda v: "-" if v is None else f"{v * 1e3:.0f}"  # noqa: E731
        err = "model only" if r.get("model_only") else ("-" if r["error"] is None else f"{r['error'] * 100:+.1f}%")
        print(f"| {r['config']} | {r['link']} | {r['nnodes']}x{r['nproc_per_node']} | {fmt(r['predicted_s'])} | "
              f"{fmt(r['bound_s'])} | {fmt(r['cpu_floor_s'])} | {fmt(r['measured_s'])} | {err} |")
    if errors:
        print(f"\n2x1 figures: mean absolute error {summary['mean_abs_error'] * 100:.1f}%, worst "
              f"{summary['worst_abs_error'] * 100:.1f}% over {len(errors)}; {results['minutes']:.1f} min; wrote {out}")


if __name__ == "__main__":
    main()
