"""What `import acspeed` adds on top of `import torch`.

Alternates fresh interpreters running `import torch` (baseline) and `import torch; import acspeed`
(candidate), timing the imports inside each interpreter; also reports the in-process time of the
`import acspeed` line itself. Usage: python bench/runtime/import_time.py [--pairs 30] [--json FILE]
[--fake-cuda]

--fake-cuda: every interpreter runs under tests/tuner/torch_on_cuda.py, as the tests simulate a machine
where torch can use CUDA (what acspeed does differently there: NCCL's variables, acspeed.first_group).
That stand-in imports torch before the timed code, so then only the `import acspeed` line is a
measure; the whole-import comparison is of two near-empty scripts."""
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


TORCH_ON_CUDA = REPO / "tests" / "tuner" / "torch_on_cuda.py"


def run(with_acspeed: bool, fake_cuda: bool = False) -> tuple:
    code = SCRIPT.format(extra="import acspeed\n" if with_acspeed else "")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "python"), os.environ.get("PYTHONPATH", "")]))
    argv = [sys.executable, "-c", code]
    if fake_cuda:  # torch's own NCCL and CUDA, as a CUDA wheel of the lent machines reports them
        env = dict(env, FAKE_TORCH_NCCL=env.get("FAKE_TORCH_NCCL", "2.28.9"), FAKE_TORCH_CUDA=env.get("FAKE_TORCH_CUDA", "13.0"))
        argv = [sys.executable, str(TORCH_ON_CUDA), "-c", code]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, env=env)
    total, after_torch = map(float, out.stdout.split())
    return total, after_torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--fake-cuda", action="store_true", help="as on a machine where torch can use CUDA")
    args = parser.parse_args()
    run(True, args.fake_cuda)  # warm the file cache
    baseline, candidate, own = [], [], []
    for _ in range(args.pairs):
        baseline.append(run(False, args.fake_cuda)[0])
        total, after_torch = run(True, args.fake_cuda)
        candidate.append(total)
        own.append(after_torch)
    result = stats.paired(candidate, baseline)
    result["acspeed_line_median_s"] = float(sorted(own)[len(own) // 2])
    result["acspeed_line_max_s"] = max(own)
    result["fake_cuda"] = args.fake_cuda
    print("import torch + import acspeed vs import torch:", stats.describe(result, "ms", 1000))
    print(f"the `import acspeed` line itself: median {result['acspeed_line_median_s'] * 1000:.2f} ms, "
          f"max {result['acspeed_line_max_s'] * 1000:.2f} ms")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
