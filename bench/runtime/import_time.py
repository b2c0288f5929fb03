"""What `import acspeed` adds on top of `import torch`.

Alternates fresh interpreters running `import torch` (baseline) and `import torch; import acspeed`
(candidate), timing the imports inside each interpreter; also reports the in-process time of the
`import acspeed` line itself. Usage: python bench/runtime/import_time.py [--pairs 30] [--json FILE]"""
import argparse
import json
import os
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # bench/stats.py
import stats  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ("import time\nt0 = time.perf_counter()\nimport torch\nt1 = time.perf_counter()\n{extra}"
         "t2 = time.perf_counter()\nprint(t2 - t0, t2 - t1)\n")


def run(with_acspeed: bool) -> tuple:
    code = SCRIPT.format(extra="import acspeed\n" if with_acspeed else "")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "python"), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    total, after_torch = map(float, out.stdout.split())
    return total, after_torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    run(True)  # warm the file cache
    baseline, candidate, own = [], [], []
    for _ in range(args.pairs):
        baseline.append(run(False)[0])
        total, after_torch = run(True)
        candidate.append(total)
        own.append(after_torch)
    result = stats.paired(candidate, baseline)
    result["acspeed_line_median_s"] = float(sorted(own)[len(own) // 2])
    result["acspeed_line_max_s"] = max(own)
    print("import torch + import acspeed vs import torch:", stats.describe(result, "ms", 1000))
    print(f"the `import acspeed` line itself: median {result['acspeed_line_median_s'] * 1000:.2f} ms, "
          f"max {result['acspeed_line_max_s'] * 1000:.2f} ms")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
