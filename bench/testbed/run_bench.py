"""The testbed's proof, side by side in one run (results in RESULTS.md):
  1. link goodput under each cap (link_throughput.py, one and several TCP streams);
  2. per-step time of a communication-heavy DDP model (resnet18 at 32x32) as the cap falls, next
     to the compute-only bound (same per-rank work, no communication), one process per node pinned
     to its own core.
Profiles are run in rotated order in every repeat so slow drift of the machine's load hits them
alike. Medians and ratios carry 95% bootstrap intervals (fixed seed). Raw numbers go to a versioned
JSON file (never overwritten).

    python3 bench/testbed/run_bench.py --testbed build/tuner/testbed/acspeed-testbed --out results.json
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import subprocess
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
# (profile, streams per sender): caps, a per-flow cap, node 0's downlink shared by two senders, and
# the uncapped veth (what the CPUs allow).
LINK_PROFILES = [("2x1@500mbit", 1), ("2x1@1gbit", 1), ("2x1@2gbit", 1), ("2x1@1gbit/250mbit", 3),
                 ("3x1@500mbit", 1), ("2x1", 1)]
WIRE_PER_PAYLOAD = 1514 / 1448  # Ethernet + IPv4 + TCP (timestamps) bytes per payload byte at MTU 1500
DDP_PROFILES = ["2x1", "2x1@5gbit", "2x1@2gbit", "2x1@1gbit", "2x1@500mbit"]


def run_json(cmd, timeout):
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): {' '.join(cmd)}\n{result.stderr[-3000:]}")
    lines = [l for l in result.stdout.splitlines() if l.startswith("{")]
    return json.loads(lines[-1])


def boot_ci(samples, stat, rng, n=2000):
    samples = np.asarray(samples)
    values = [stat(rng.choice(samples, samples.size)) for _ in range(n)]
    return float(stat(samples)), float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))


def boot_ratio(num, den, rng, n=2000):
    num, den = np.asarray(num), np.asarray(den)
    values = [np.median(rng.choice(num, num.size)) / np.median(rng.choice(den, den.size)) for _ in range(n)]
    return float(np.median(num) / np.median(den)), float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))


def rate_mbit(text):
    for suffix, scale in {"gbit": 1e3, "mbit": 1.0, "kbit": 1e-3}.items():
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * scale
    raise ValueError(text)


def effective_cap_mbit(profile, streams):
    """What the receiver can get: each sender's uplink (or its flows' caps), node 0's downlink."""
    if "@" not in profile:
        return None
    nodes = int(profile.split("x")[0])
    caps = profile.split("@")[1].split("/")
    link = rate_mbit(caps[0])
    per_sender = min(link, streams * rate_mbit(caps[1])) if len(caps) > 1 else link
    return min(link, (nodes - 1) * per_sender)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--testbed", required=True)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--out", required=True)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--link-repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--skip-link", action="store_true")
    parser.add_argument("--skip-ddp", action="store_true")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    if out.exists():
        sys.exit(f"{out} exists; not overwriting it")
    rng = np.random.default_rng(20261202)
    import torch
    record = {"version": 1, "command": sys.argv, "date": datetime.datetime.utcnow().isoformat() + "Z",
              "torch": torch.__version__, "cpus": os.cpu_count(), "kernel": platform.release(),
              "link": {}, "ddp": {}}
    env = dict(os.environ, ACSPEED_PYTHON=args.python)

    if not args.skip_link:
        raw = {p: [] for p, _ in LINK_PROFILES}
        flows = {p: [] for p, _ in LINK_PROFILES}
        for rep in range(args.link_repeats):
            order = LINK_PROFILES[rep % len(LINK_PROFILES):] + LINK_PROFILES[:rep % len(LINK_PROFILES)]
            for profile, streams in order:
                r = run_json([args.testbed, "run", profile, "--pin", "--timeout", "60", "--", args.python,
                              str(HERE / "link_throughput.py"), "--seconds", "3", "--streams", str(streams)], 90)
                raw[profile].append(r["total_mbit_s"])
                flows[profile].extend(r["flow_mbit_s"])
                print(f"link {profile}: {r['total_mbit_s']:.0f} Mbit/s flows {[round(f) for f in r['flow_mbit_s']]}", flush=True)
        print("\n| profile | senders x streams | cap seen by node 0 (Mbit/s) | goodput (Mbit/s), mean [95% CI] "
              "| per connection (Mbit/s), mean | wire rate / cap |")
        print("|---|---|---|---|---|---|")
        for profile, streams in LINK_PROFILES:
            mean, lo, hi = boot_ci(raw[profile], np.mean, rng)
            cap = effective_cap_mbit(profile, streams)
            senders = int(profile.split("x")[0]) - 1
            record["link"][profile] = {"streams": streams, "total_mbit_s": raw[profile], "flow_mbit_s": flows[profile]}
            ratio = f"{mean * WIRE_PER_PAYLOAD / cap:.3f}" if cap else "-"
            print(f"| {profile} | {senders} x {streams} | {cap if cap else 'none'} | {mean:.0f} [{lo:.0f}, {hi:.0f}] | "
                  f"{np.mean(flows[profile]):.0f} | {ratio} |", flush=True)

    if not args.skip_ddp:
        cases = [(p, "ddp") for p in DDP_PROFILES] + [("2x1", "compute")]
        steps = {c: [] for c in cases}
        for rep in range(args.repeats):
            order = cases[rep % len(cases):] + cases[:rep % len(cases)]
            for profile, mode in order:
                r = run_json([args.testbed, "run", profile, "--pin", "--timeout", "400", "--torchrun", "--",
                              str(HERE / "ddp_step.py"), "--mode", mode, "--steps", str(args.steps)], 450)
                steps[(profile, mode)].extend(r["step_s"])
                print(f"ddp {profile} {mode}: p50 {np.median(r['step_s']) * 1e3:.0f} ms", flush=True)
        compute = steps[("2x1", "compute")]
        print("\n| link | mode | step p50 (ms) [95% CI] | p90 (ms) | step / compute-only [95% CI] |")
        print("|---|---|---|---|---|")
        for case in cases:
            med, lo, hi = boot_ci(steps[case], np.median, rng)
            ratio, rlo, rhi = boot_ratio(steps[case], compute, rng)
            record["ddp"][f"{case[0]} {case[1]}"] = steps[case]
            print(f"| {case[0].split('@')[1] if '@' in case[0] else 'uncapped'} | {case[1]} | "
                  f"{med * 1e3:.0f} [{lo * 1e3:.0f}, {hi * 1e3:.0f}] | {np.percentile(steps[case], 90) * 1e3:.0f} | "
                  f"{ratio:.2f} [{rlo:.2f}, {rhi:.2f}] |", flush=True)
    out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
