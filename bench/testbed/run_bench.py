"""The testbed's proof, side by side in one run (results in RESULTS.md):
  1. link goodput under each cap (link_throughput.py, one and several TCP streams);
  2. per-step time of a communication-heavy DDP model (resnet18 at 32x32) as the cap falls, each
     DDP step alternated in the same workers with the compute-only bound (the same step under
     no_sync(): same per-rank work, no allreduce), one process per node pinned to its own core.
Profiles are run in rotated order in every repeat so slow drift of the machine's load hits them
alike. Medians and ratios carry 95% bootstrap intervals (fixed seed). Raw numbers go to a versioned
JSON file (never overwritten).

    python3 bench/testbed/run_bench.py --testbed build/bin/acspeed-testbed --out results.json
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

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # bench/stats.py
import stats  # noqa: E402

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


def boot_ci(samples, stat):
    """(statistic, 95% interval low, high) of the samples."""
    samples = np.asarray(samples, float)
    return (float(stat(samples)), *stats.bootstrap_ci(samples, stat))


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


def print_link_table(record):
    print("\n| profile | senders x streams | cap seen by node 0 (Mbit/s) | goodput (Mbit/s), mean [95% CI] "
          "| per connection (Mbit/s), mean | wire rate / cap |")
    print("|---|---|---|---|---|---|")
    for profile, entry in record["link"].items():
        streams = entry["streams"]
        mean, lo, hi = boot_ci(entry["total_mbit_s"], np.mean)
        cap = effective_cap_mbit(profile, streams)
        senders = int(profile.split("x")[0]) - 1
        ratio = f"{mean * WIRE_PER_PAYLOAD / cap:.3f}" if cap else "-"
        print(f"| {profile} | {senders} x {streams} | {cap:.0f} | {mean:.0f} [{lo:.0f}, {hi:.0f}] | "
              f"{np.mean(entry['flow_mbit_s']):.0f} | {ratio} |" if cap else
              f"| {profile} | {senders} x {streams} | none | {mean:.0f} [{lo:.0f}, {hi:.0f}] | "
              f"{np.mean(entry['flow_mbit_s']):.0f} | - |", flush=True)


def default_model_params():
    """Parameters of ddp_step.py's default model (resnet18, 10 classes)."""
    import torchvision
    return sum(p.numel() for p in torchvision.models.resnet18(num_classes=10).parameters())


def print_ddp_table(record):
    print("\n| link | DDP step p50 (ms) [95% CI] | compute-only p50 (ms) [95% CI] | DDP / compute-only per pair "
          "[95% CI] | DDP - compute-only per pair (ms) [95% CI] | gradients over the cap (ms) |")
    print("|---|---|---|---|---|---|")
    for profile, entry in record["ddp"].items():
        comm, compute = np.asarray(entry["comm_step_s"]), np.asarray(entry["compute_step_s"])
        med, lo, hi = boot_ci(comm, np.median)
        cmed, clo, chi = boot_ci(compute, np.median)
        rmed, rlo, rhi = boot_ci(comm / compute, np.median)
        dmed, dlo, dhi = boot_ci(comm - compute, np.median)
        link = profile.split("@")[1] if "@" in profile else "uncapped"
        # Ring allreduce between 2 nodes: each sends the whole fp32 gradient once.
        params = record.get("params") or default_model_params()
        transfer = (f"{params * 4 * 8 / (rate_mbit(link) * 1e6 / WIRE_PER_PAYLOAD) * 1e3:.0f}"
                    if params and link != "uncapped" else "-")
        print(f"| {link} | {med * 1e3:.0f} [{lo * 1e3:.0f}, {hi * 1e3:.0f}] | {cmed * 1e3:.0f} "
              f"[{clo * 1e3:.0f}, {chi * 1e3:.0f}] | {rmed:.2f} [{rlo:.2f}, {rhi:.2f}] | "
              f"{dmed * 1e3:.0f} [{dlo * 1e3:.0f}, {dhi * 1e3:.0f}] | {transfer} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--testbed", help="the acspeed-testbed executable (required unless --from-json)")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--out", help="where the raw results go (JSON, never overwritten)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--link-repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8, help="timed (DDP, compute-only) pairs per launch")
    parser.add_argument("--skip-link", action="store_true")
    parser.add_argument("--skip-ddp", action="store_true")
    parser.add_argument("--from-json", metavar="FILE", help="print the tables of an earlier run's results, run nothing")
    args = parser.parse_args()
    if args.from_json:
        record = json.loads(pathlib.Path(args.from_json).read_text())
        if record["link"]:
            print_link_table(record)
        if record["ddp"]:
            print_ddp_table(record)
        return
    if not args.out or not args.testbed:
        parser.error("--testbed and --out are required unless --from-json")
    out = pathlib.Path(args.out)
    if out.exists():
        sys.exit(f"{out} exists; not overwriting it")
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
        for profile, streams in LINK_PROFILES:
            record["link"][profile] = {"streams": streams, "total_mbit_s": raw[profile], "flow_mbit_s": flows[profile]}
        print_link_table(record)

    if not args.skip_ddp:
        comm = {p: [] for p in DDP_PROFILES}
        compute = {p: [] for p in DDP_PROFILES}
        for rep in range(args.repeats):
            order = DDP_PROFILES[rep % len(DDP_PROFILES):] + DDP_PROFILES[:rep % len(DDP_PROFILES)]
            for profile in order:
                r = run_json([args.testbed, "run", profile, "--pin", "--timeout", "400", "--torchrun", "--",
                              str(HERE / "ddp_step.py"), "--pairs", str(args.steps)], 450)
                comm[profile].extend(r["comm_step_s"])
                compute[profile].extend(r["compute_step_s"])
                print(f"ddp {profile}: p50 {np.median(r['comm_step_s']) * 1e3:.0f} ms, "
                      f"compute-only {np.median(r['compute_step_s']) * 1e3:.0f} ms", flush=True)
        for profile in DDP_PROFILES:
            record["ddp"][profile] = {"comm_step_s": comm[profile], "compute_step_s": compute[profile]}
            record["params"] = r["params"]
        print_ddp_table(record)
    out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
