#!/usr/bin/env python3
"""Coverage of the step inflation's 95% interval (tuner/include/acspeed/tuner/inflation.h) on synthetic loss curves whose
inflation is known, through `acspeed-tune inflation --json` (the tuner's own code).

Each replicate: T steps of a reference curve 0.3 + 2 exp(-t / 20) and of the compressed run, the
same curve stretched F times in steps (so its true inflation is F at any target), each plus the noise
of distinct batches: a part both runs share (the same batch is as hard for both; sd `shared`) and a
part of their own (sd `own`), seeded per replicate. The interval covers when low <= F <= high (F = 10
is never reached within T: covered when the upper end is unbounded or at least 10, or when the
verdict is "infinite" and F x the reference's steps to the target exceeds T). Also counted:
intervals whose lower end sits on the point estimate (the clamp `min(estimate, 2.5% quantile)`).

    python3 bench/compression/inflation_coverage.py [--replicates 200] [--steps 120] [--tune build/bin/acspeed-tune]

Writes bench/compression/results/inflation_coverage.json (unless --no-write) and prints one table.
"""
import argparse
import json
import math
import os
import pathlib
import random
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
FACTORS = [1.0, 1.5, 0.7, 10.0]
NOISES = [(0.04, 0.03), (0.0, 0.06), (0.0, 0.15)]


def loss(t):
    return 0.3 + 2.0 * math.exp(-t / 20.0)


def replicate(factor, shared, own, steps, seed):
    rng = random.Random(seed)
    batches = [rng.gauss(0, shared) for _ in range(steps)]
    reference = [loss(t) + batches[t] + rng.gauss(0, own) for t in range(steps)]
    compressed = [loss(t / factor) + batches[t] + rng.gauss(0, own) for t in range(steps)]
    return compressed, reference


def measure(tune, compressed, reference, seed, folder):
    paths = []
    for name, curve in (("c", compressed), ("r", reference)):
        path = os.path.join(folder, name + ".json")
        with open(path, "w") as f:
            json.dump(curve, f)
        paths.append(path)
    out = subprocess.run([tune, "inflation", *paths, "--seed", str(seed), "--json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)["inflation"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--tune", default=str(HERE.parents[1] / "build" / "bin" / "acspeed-tune"))
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for factor in FACTORS:
            for shared, own in NOISES:
                covered = clamped = measured = 0
                widths = []
                for r in range(args.replicates):
                    c, ref = replicate(factor, shared, own, args.steps, 1000 * r + 7)
                    i = measure(args.tune, c, ref, r, folder)
                    low = i["low"] if i["low"] is not None else math.inf
                    high = i["high"] if i["high"] is not None else math.inf
                    if i["kind"] == "infinite":  # right when F truly is beyond what T steps can show
                        covered += factor * i["reference_steps"] > i["steps"]
                    elif i["kind"] == "measured" and low <= factor <= high:
                        covered += 1
                    if i["kind"] == "measured":
                        measured += 1
                        clamped += i["estimate"] is not None and low == i["estimate"]
                        if math.isfinite(high):
                            widths.append(high / low)
                rows.append({"inflation": factor, "shared_sd": shared, "own_sd": own, "replicates": args.replicates,
                             "coverage": covered / args.replicates, "measured": measured,
                             "lower_end_at_estimate": clamped,
                             "median_high_over_low": sorted(widths)[len(widths) // 2] if widths else None})
    print(f"{'F':>5} {'shared':>6} {'own':>5} {'coverage':>8} {'measured':>8} {'low=est':>7} {'high/low':>8}")
    for row in rows:
        ratio = row["median_high_over_low"]
        print(f"{row['inflation']:>5g} {row['shared_sd']:>6g} {row['own_sd']:>5g} {row['coverage']:>8.3f} "
              f"{row['measured']:>8} {row['lower_end_at_estimate']:>7} {ratio if ratio is None else round(ratio, 3)!s:>8}")
    if not args.no_write:
        (HERE / "results").mkdir(exist_ok=True)
        with open(HERE / "results" / "inflation_coverage.json", "w") as f:
            json.dump({"command": sys.argv, "steps": args.steps, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
