"""What the comm hook path itself costs in CPU per training step of resnet18 (100 classes): its
gradients cut into buckets (5 MiB, or --bucket-mb) as DDP hands them over, on one CPU thread (as one pinned testbed
node has). Each pair is measured side by side (alternated); CPU time, so the machine's other load
does not enter it. Two parts:

  1. the old engine (before 7668da3) against the current one, piece by piece, fp16 and bf16:
       guard    old: bool(torch.isfinite(packed).all()) per bucket   new: torch.aminmax (acspeed.engine.fallback.nonfinite)
       packing  old: flat.to(dtype) per bucket (new tensor)           new: copy_ into a kept buffer
  2. the whole hook call, acspeed's against torch's, in a one-rank gloo group (its collectives cost
     next to nothing, so what is left is the hook path: packing, division, Python per bucket, the
     future callbacks, the non-finite check, unpacking): acspeed allreduce vs torch's `allreduce_hook`, acspeed
     fp16/bf16 vs `fp16_compress_hook` / `bf16_compress_hook`. Process CPU time per step (every
     thread: the callbacks run on gloo's).

    python3 bench/runtime/hook_path_cost.py [--pairs 15] [--json FILE]
"""
import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parents[1] / "python"),  # bench/stats.py, acspeed
                str(HERE.parents[1] / "tests" / "python")]  # FakeBucket: what DDP hands a comm hook

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torchvision  # noqa: E402
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks  # noqa: E402

import stats  # noqa: E402
from ddp_scenarios import FakeBucket  # noqa: E402


def _alternate(pairs: int, old, new, clock) -> dict:
    """{old: [...], new: [...]} per-step times of `pairs` alternated pairs (after one warm-up pair)."""
    samples = {"old": [], "new": []}
    for pair in range(pairs + 1):
        order = (("old", old), ("new", new))
        for side, work in (order if pair % 2 == 0 else order[::-1]):
            begin = clock()
            work()
            if pair > 0:
                samples[side].append(clock() - begin)
    return samples


def _report(record: dict, key: str, samples: dict, old_name: str, new_name: str) -> None:
    result = stats.paired(samples["new"], samples["old"])
    record["results"][key] = {**result, "old": old_name, "new": new_name, "samples": samples}
    low, high = result["difference_ci95"]
    print(f"  {key}: {old_name} {result['baseline_median'] * 1e3:.2f} ms, {new_name} "
          f"{result['candidate_median'] * 1e3:.2f} ms; difference {result['difference_mean'] * 1e3:+.2f} ms "
          f"[95% CI {low * 1e3:+.2f}, {high * 1e3:+.2f}]", flush=True)


def pieces(record: dict, flats, pairs: int) -> None:
    from acspeed.engine.fallback import nonfinite  # noqa: PLC0415
    print("1. old engine vs current, per step (thread CPU time):")
    for dtype in (torch.float16, torch.bfloat16):
        name = str(dtype).replace("torch.", "")
        packed = [flat.to(dtype) for flat in flats]
        kept = [torch.empty_like(p) for p in packed]
        guard = _alternate(pairs, lambda: [bool(torch.isfinite(p).all()) for p in packed],
                           lambda: [nonfinite(p) for p in packed], time.thread_time)
        _report(record, f"guard/{name}", guard, "old isfinite().all()", "new aminmax")
        packing = _alternate(pairs, lambda: [flat.to(dtype) for flat in flats],
                             lambda: [k.copy_(flat) for k, flat in zip(kept, flats)], time.thread_time)
        _report(record, f"packing/{name}", packing, "old to()", "new copy_ into a kept buffer")


def hook_calls(record: dict, flats, pairs: int) -> None:
    import acspeed.engine.state  # noqa: PLC0415
    from acspeed import _runtime, scaler  # noqa: PLC0415
    print("2. one step of hook calls, acspeed's vs torch's (process CPU time, one-rank gloo group):")
    group = dist.group.WORLD
    params = [torch.nn.Parameter(torch.zeros(1))]
    # "fp16 unchecked": acspeed's fp16 with the non-finite check off (as under a GradScaler), to tell the
    # check's cost from the rest of the hook path.
    for key, compression, stock_name, stock in (
            ("none", "none", "allreduce_hook", default_hooks.allreduce_hook),
            ("fp16", "fp16", "fp16_compress_hook", default_hooks.fp16_compress_hook),
            ("fp16 unchecked", "fp16", "fp16_compress_hook", default_hooks.fp16_compress_hook),
            ("bf16", "bf16", "bf16_compress_hook", default_hooks.bf16_compress_hook)):
        config, warnings = _runtime.core().CommConfig.from_json(json.dumps(
            {"version": 1, "algorithm": "allreduce", "streams": 1, "compression": compression}))
        assert not warnings, warnings
        scaler.configure(True if key == "fp16 unchecked" else None)
        state = acspeed.engine.state.HookState.create(config, group, params)
        buckets = [FakeBucket(i, flat, i == len(flats) - 1) for i, flat in enumerate(flats)]

        def run(hook, hook_state):
            futures = [hook(hook_state, bucket) for bucket in buckets]
            for future in futures:
                future.wait()
        samples = _alternate(pairs, lambda: run(stock, group), lambda: run(acspeed.engine.state.comm_hook, state),
                             time.process_time)
        assert state.nonfinite_fallbacks == 0
        state.close()
        _report(record, f"hook/{key}", samples, f"torch {stock_name}", f"acspeed allreduce/{key}")
    scaler.configure(None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--json", help="write the per-pair times here (never overwritten)")
    parser.add_argument("--bucket-mb", type=float, default=5.0, help="bucket size (MiB) the gradients are cut into")
    args = parser.parse_args()
    if args.json and pathlib.Path(args.json).exists():
        sys.exit(f"{args.json} exists; not overwriting it")
    torch.set_num_threads(1)
    numel = sum(p.numel() for p in torchvision.models.resnet18(num_classes=100).parameters())
    per_bucket = int(args.bucket_mb * 1024 * 1024) // 4
    flats = [torch.randn(min(per_bucket, numel - start)) for start in range(0, numel, per_bucket)]
    record = {"version": 1, "command": sys.argv, "torch": torch.__version__, "gradients": numel,
              "buckets": len(flats), "bucket_mb": args.bucket_mb, "load_average": list(os.getloadavg()), "results": {}}
    print(f"resnet18: {numel} gradients per step in {len(flats)} buckets of {args.bucket_mb:g} MiB, one thread")
    pieces(record, flats, args.pairs)
    os.environ["GLOO_SOCKET_IFNAME"] = os.environ.get("GLOO_SOCKET_IFNAME", "lo")
    with tempfile.TemporaryDirectory() as folder:
        dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=0, world_size=1)
        try:
            hook_calls(record, flats, args.pairs)
        finally:
            dist.destroy_process_group()
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
