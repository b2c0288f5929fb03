"""Where the old engine's time went, per training step of resnet18 (100 classes) on one CPU thread (as
one pinned testbed node has): the per-bucket work of the old hook engine (before 7668da3) against the
current one, each pair measured side by side (alternated), for a step's gradients cut into 5 MiB
buckets and compressed to fp16/bf16 (CPU time of the thread doing the work):

  guard      old: bool(torch.isfinite(packed).all()) per bucket (a bool tensor, then a host read)
             new: torch.aminmax(packed) per bucket (hooks._nonfinite; read once per step)
  packing    old: flat.to(dtype) per bucket (a new tensor each step, as torch's compress hooks do)
             new: copy_ into a buffer kept across steps (buffers.Scratch)

    python3 bench/runtime/guard_cost.py [--pairs 15] [--json FILE]
"""
import argparse
import json
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parents[1] / "python")]  # bench/stats.py, acspeed

import torch  # noqa: E402
import torchvision  # noqa: E402

import stats  # noqa: E402
from acspeed.hooks import _nonfinite  # noqa: E402

BUCKET_BYTES = 5 * 1024 * 1024


def _step_time(work, items) -> float:
    """CPU time of this thread (the work is single-threaded): other processes' load does not enter it."""
    begin = time.thread_time()
    for item in items:
        work(item)
    return time.thread_time() - begin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--json", help="write the per-pair times here (never overwritten)")
    args = parser.parse_args()
    if args.json and pathlib.Path(args.json).exists():
        sys.exit(f"{args.json} exists; not overwriting it")
    torch.set_num_threads(1)
    numel = sum(p.numel() for p in torchvision.models.resnet18(num_classes=100).parameters())
    per_bucket = BUCKET_BYTES // 4
    flats = [torch.randn(min(per_bucket, numel - start)) for start in range(0, numel, per_bucket)]
    record = {"version": 1, "command": sys.argv, "torch": torch.__version__, "gradients": numel,
              "buckets": len(flats), "results": {}}
    print(f"resnet18: {numel} gradients per step in {len(flats)} buckets of 5 MiB, one thread, per step:")
    for dtype in (torch.float16, torch.bfloat16):
        packed = [flat.to(dtype) for flat in flats]
        kept = [torch.empty_like(p) for p in packed]
        pairs = {
            "guard": (lambda p: bool(torch.isfinite(p).all()), lambda p: _nonfinite(p), packed, packed),
            "packing": (lambda f: f.to(dtype), lambda fk: fk[1].copy_(fk[0]), flats, list(zip(flats, kept))),
        }
        for name, (old, new, old_items, new_items) in pairs.items():
            samples = {"old": [], "new": []}
            for pair in range(args.pairs + 1):
                order = (("old", old, old_items), ("new", new, new_items))
                for side, work, items in (order if pair % 2 == 0 else order[::-1]):
                    elapsed = _step_time(work, items)
                    if pair > 0:  # the first pair warms up
                        samples[side].append(elapsed)
            result = stats.paired(samples["new"], samples["old"])
            record["results"][f"{name}/{str(dtype).replace('torch.', '')}"] = {**result, "samples": samples}
            low, high = result["difference_ci95"]
            print(f"  {str(dtype).replace('torch.', '')} {name}: old {result['baseline_median'] * 1e3:.1f} ms, new "
                  f"{result['candidate_median'] * 1e3:.1f} ms; new - old {result['difference_mean'] * 1e3:+.1f} ms "
                  f"[95% CI {low * 1e3:+.1f}, {high * 1e3:+.1f}]", flush=True)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
