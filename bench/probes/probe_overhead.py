"""Overhead of the step probe: DDP step time with StepProbe on vs off, as a ratio with its 95%
confidence interval over alternated pairs (the tuner's rule, tuner/src/decision_rule.h).

Run under torchrun (gloo on CPU, NCCL on GPU), e.g.
    ACSPEED_DISABLE=1 PYTHONPATH=python python -m torch.distributed.run --nproc_per_node 2 \
        bench/probes/probe_overhead.py --model resnet18 --pairs 12 --steps 10
(importing acspeed.probes imports acspeed, whose DDP patch would otherwise apply a stored config;
ACSPEED_DISABLE=1 measures the probe on plain DDP).

One pair = one block of --steps steps with the probe and one without, in the same workers, the
order alternating between pairs. A step's time is the maximum over ranks. The pair's ratio is
median(on) / median(off); the reported interval is a seeded percentile bootstrap of the mean ratio
over pairs. The probe's summary() (the all-gather) runs after each block,
outside the timed steps, as in the trial worker. The observer calls a comm hook adds (two C++ calls
per bucket) are timed separately, per call.

On a shared, loaded machine the paired ratio's interval is wider than the effect. The probe's own
cost is therefore also measured directly (--direct-pairs): a stand-in model with as many parameters
as the real one but no compute (one scalar each, loss = their sum), backward + the probe's marks,
alternated on/off in the same process; the per-step difference (the gradient hooks, the four
marks) with its bootstrap interval, divided by the real step time, bounds the overhead.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

from acspeed.probes import StepProbe

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # bench/stats.py
import stats  # noqa: E402


def build_model(name, device):
    if name == "resnet18":
        import torchvision
        model = torchvision.models.resnet18(num_classes=10)
        def batch(n):
            return torch.randn(n, 3, 32, 32, device=device), torch.randint(0, 10, (n,), device=device)
    elif name == "mlp":
        model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(8)],
                                    torch.nn.Linear(1024, 10))
        def batch(n):
            return torch.randn(n, 1024, device=device), torch.randint(0, 10, (n,), device=device)
    else:
        raise SystemExit(f"--model '{name}' is not one of resnet18, mlp")
    return model.to(device), batch


def timed_block(model, opt, x, y, steps, probe, device):
    loss_fn = torch.nn.functional.cross_entropy
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        if probe:
            probe.step_begin()
        loss_fn(model(x), y).backward()
        if probe:
            probe.backward_end()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if probe:
            probe.step_end()
        elif device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    t = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # step time = slowest rank
    return t.tolist()


def direct_probe_cost_s(n_params, pairs, reps, seed):
    """Seconds the probe adds to one step (gradient hooks + marks), measured on a compute-free model
    with n_params scalar parameters: mean over pairs of (median on - median off), and its bootstrap
    95% interval."""
    params = [torch.nn.Parameter(torch.zeros(())) for _ in range(n_params)]
    holder = torch.nn.Module()
    holder.params = torch.nn.ParameterList(params)

    def block(probe):
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            if probe:
                probe.step_begin()
            torch.stack(params).sum().backward()
            if probe:
                probe.backward_end()
                probe.step_end()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    block(None)
    diffs = []
    for pair in range(pairs):
        result = {}
        for arm in (("on", "off") if pair % 2 == 0 else ("off", "on")):
            probe = StepProbe(holder) if arm == "on" else None
            result[arm] = block(probe)
            if probe:
                probe.close()
        diffs.append(result["on"] - result["off"])
    return statistics.mean(diffs), stats.bootstrap_ci(diffs, np.mean, seed)


def observer_call_cost_ns(calls=200000):
    """Nanoseconds per bucket_launched + bucket_completed pair from Python (no step open)."""
    probe = StepProbe(torch.nn.Linear(1, 1))
    t0 = time.perf_counter_ns()
    for i in range(calls):
        probe.bucket_launched(0, 4096)
        probe.bucket_completed(0)
    cost = (time.perf_counter_ns() - t0) / calls
    probe.close()
    return cost


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet18", help="resnet18 (32x32 inputs) or mlp")
    ap.add_argument("--batch-size", type=int, default=16, help="per-device batch")
    ap.add_argument("--pairs", type=int, default=12)
    ap.add_argument("--steps", type=int, default=10, help="timed steps per block")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1234, help="bootstrap seed")
    ap.add_argument("--direct-pairs", type=int, default=40,
                    help="pairs of the direct cost measurement (0 = skip it)")
    ap.add_argument("--json", help="write the result here (refuses to overwrite)")
    args = ap.parse_args()
    if args.json and os.path.exists(args.json):
        raise SystemExit(f"--json {args.json} exists; not overwriting it")

    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    torch.manual_seed(0)
    net, make_batch = build_model(args.model, device)
    model = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = make_batch(args.batch_size)
    timed_block(model, opt, x, y, args.warmup, None, device)

    ratios, on_medians, off_medians, backend = [], [], [], None
    for pair in range(args.pairs):
        medians = {}
        for arm in (("on", "off") if pair % 2 == 0 else ("off", "on")):
            probe = StepProbe(model) if arm == "on" else None
            medians[arm] = statistics.median(timed_block(model, opt, x, y, args.steps, probe, device))
            if probe:
                backend = probe.backend
                probe.summary()  # the gather the trial worker does, outside the timed steps
                probe.close()
        ratios.append(medians["on"] / medians["off"])
        on_medians.append(medians["on"])
        off_medians.append(medians["off"])

    call_ns = observer_call_cost_ns()
    n_params = sum(1 for p in model.parameters() if p.requires_grad)
    direct = direct_probe_cost_s(n_params, args.direct_pairs, 50, args.seed) if args.direct_pairs else None
    if rank != 0:
        dist.destroy_process_group()
        return
    lo, hi = stats.bootstrap_ci(ratios, np.mean, args.seed)
    result = {
        "version": 1,
        "command": f"torchrun --nproc_per_node {world} bench/probes/probe_overhead.py "
                   f"--model {args.model} --batch-size {args.batch_size} --pairs {args.pairs} "
                   f"--steps {args.steps} --warmup {args.warmup} --seed {args.seed} "
                   f"--direct-pairs {args.direct_pairs}",
        "torch": torch.__version__, "world_size": world, "backend": backend,
        "environment": {k: v for k, v in sorted(os.environ.items()) if k.startswith(("ACSPEED_", "NCCL_"))},
        "device": device.type, "pairs": args.pairs,
        "ratio_mean": statistics.mean(ratios), "ratio_ci95_bootstrap": [lo, hi],
        "ratios": ratios,
        "median_step_on_s": statistics.median(on_medians),
        "median_step_off_s": statistics.median(off_medians),
        "observer_pair_ns": call_ns,
        "parameters": n_params,
    }
    if direct:
        cost, (cost_lo, cost_hi) = direct
        off = result["median_step_off_s"]
        result.update(direct_cost_s=cost, direct_cost_ci95_s=[cost_lo, cost_hi],
                      direct_overhead=cost / off, direct_overhead_ci95=[cost_lo / off, cost_hi / off])
    print(f"{'model':>9} {'ranks':>5} {'probe':>6} {'pairs':>5} {'off p50(ms)':>11} {'on p50(ms)':>10} "
          f"{'on/off':>7} {'95% CI (bootstrap)':>19} {'observer(ns/bucket)':>19}")
    print(f"{args.model:>9} {world:>5} {backend:>6} {args.pairs:>5} "
          f"{result['median_step_off_s'] * 1e3:>11.2f} {result['median_step_on_s'] * 1e3:>10.2f} "
          f"{result['ratio_mean']:>7.4f} {f'[{lo:.4f}, {hi:.4f}]':>19} "
          f"{call_ns:>19.0f}")
    if direct:
        print(f"direct probe cost per step ({n_params} parameters, no compute): "
              f"{result['direct_cost_s'] * 1e6:.1f} us [{cost_lo * 1e6:.1f}, {cost_hi * 1e6:.1f}] (95% CI) = "
              f"{result['direct_overhead'] * 100:.3f}% [{result['direct_overhead_ci95'][0] * 100:.3f}%, "
              f"{result['direct_overhead_ci95'][1] * 100:.3f}%] of the {off * 1e3:.1f} ms step without probe")
    if args.json:
        with open(args.json, "x") as f:
            json.dump(result, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
