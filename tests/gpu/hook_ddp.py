"""Worker of tests/gpu/check_hook.sh: acspeed's own comm hook on NCCL, two ranks on one GPU.

For each algorithm (allreduce and hierarchical with 2 streams, reduce_scatter with 1), and allreduce x
2 streams x fp16 (trimmed to fit the check's 45 s on the lent GPU machine): train a model with plain DDP
(or torch's fp16 compress hook) and with acspeed's hook from the same start; the parameters must be
bit for bit the same (two ranks: a sum of two is the same in any order). Then profile two steps of
acspeed's run with torch.profiler and check, in this rank's trace:
  * NCCL kernels ran while compute kernels ran (communication overlapped backward);
  * NCCL kernels ran on as many streams as there are lanes, and with 2 lanes both lanes' kernels
    were in flight at once;
  * no host synchronisation inside backward (cuda*Synchronize calls in the profiled backward
    ranges): none without compression, at most one per step with the non-finite fallback.
Overlap is computed by acspeed._probes.kernel_overlap (probes/, C++) from the trace's kernels.

The environment carries the rendezvous (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); each rank
poses as its own node (NODE_RANK = RANK), so hierarchical runs its inter-node path. The hook is
installed with acspeed._patch.install_hook, which needs no compiled runtime (acspeed._core). Results go to
--out as JSON; exit status 0 only if every property holds. `--device cpu` runs the same training on
gloo (no trace checks) so the CPU test suite can check this worker.
"""
import argparse
import contextlib
import json
import os
import sys

CONFIGS = [("allreduce", 2, "none"), ("reduce_scatter", 1, "none"), ("hierarchical", 2, "none"),
           ("allreduce", 2, "fp16")]
BACKWARD = "acspeed_check_backward"  # record_function range around each profiled backward
WARMUP, PROFILED = 3, 2


def kernels_from_trace(trace: dict) -> list:
    """(name, stream, begin_ns, end_ns) of every GPU kernel in a torch.profiler (Chrome) trace."""
    out = []
    for event in trace.get("traceEvents", []):
        if event.get("ph") == "X" and event.get("cat") == "kernel":
            begin = int(round(float(event["ts"]) * 1000))
            out.append((event["name"], int(event.get("args", {}).get("stream", -1)), begin,
                        begin + int(round(float(event.get("dur", 0)) * 1000))))
    return out


def host_syncs_in_backward(trace: dict) -> int:
    """CUDA runtime/driver calls whose name says they synchronise (cudaStreamSynchronize,
    cudaDeviceSynchronize, cudaEventSynchronize, ...) inside a BACKWARD range of the same process."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    ranges = [(e.get("pid"), float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
              for e in events if e.get("name") == BACKWARD]
    syncs = 0
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "Synchronize" in e.get("name", ""):
            ts = float(e["ts"])
            syncs += any(pid == e.get("pid") and begin <= ts <= end for pid, begin, end in ranges)
    return syncs


def problems(result: dict, compression: str) -> list:
    """What is wrong with one config's result: its parameters, and (with a trace) its kernels."""
    found = [] if result["identical"] else [f"parameters differ from the reference (max |diff| {result['max_abs_diff']})"]
    if "comm_kernels" not in result:  # no trace (the CPU run)
        return found
    lanes = result["lanes"]
    if result["comm_kernels"] == 0 or result["comm_compute_overlap_ns"] <= 0:
        found.append("no NCCL kernel overlapped a compute kernel")
    if result["comm_streams"] != lanes:
        found.append(f"NCCL kernels ran on {result['comm_streams']} stream(s), expected one per lane ({lanes})")
    if lanes > 1 and result["comm_cross_stream_ns"] <= 0:
        found.append("the lanes' NCCL kernels never ran at the same time")
    allowed = PROFILED if compression != "none" else 0  # the non-finite fallback's one read per step
    if result["host_syncs"] > allowed:
        found.append(f"{result['host_syncs']} host synchronisation(s) inside backward, allowed {allowed}")
    return found


def make_model(torch, width):
    """Eight wide layers (at width 1024, 4 MiB of weights each: about one bucket per layer) with
    enough compute per layer for NCCL kernels to overlap."""
    torch.manual_seed(0)
    layers = []
    for _ in range(8):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 16))


def config_json(algorithm, streams, compression, bucket_mb):
    return json.dumps({"version": 1, "algorithm": algorithm, "streams": streams, "compression": compression,
                       "bucket_cap_mb": bucket_mb})


def train(torch, ddp, batches, profiler=None):
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        with torch.profiler.record_function(BACKWARD) if profiler else contextlib.nullcontext():
            loss.backward()
        optimizer.step()
        if profiler:
            profiler.step()
    return torch.cat([p.detach().flatten() for p in ddp.parameters()])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="folder for the traces and this rank's result JSON")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--width", type=int, default=1024, help="layer width (the CPU test uses a small one)")
    args = parser.parse_args()
    bucket_mb = args.width * args.width * 4 / 2**20  # about one layer per bucket
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    os.environ["NODE_RANK"] = str(rank)

    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    import acspeed._patch
    from acspeed import _runtime, _supported
    from acspeed.versions import process_group_impl

    cuda = args.device == "cuda"
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", rank=rank, world_size=world_size, **_supported.device_id_kwargs(device))
        from acspeed._probes import kernel_overlap  # built by check_hook.sh (tests/gpu/lib.sh)
    else:
        dist.init_process_group("gloo", rank=rank, world_size=world_size)
    # Which implementation runs "nccl" (torch 2.15: nccl2 unless TORCH_DIST_USE_NCCL2=0): check_hook.sh
    # asserts it is the one it asked for.
    print(f"ACSPEED_CHECK rank {rank}: process group {process_group_impl()}", flush=True)
    generator = torch.Generator().manual_seed(100 + rank)
    batches = [(torch.randn(256, args.width, generator=generator).to(device),
                torch.randn(256, 16, generator=generator).to(device)) for _ in range(WARMUP + PROFILED)]

    def wrap(hook_config=None, stock=None):
        kwargs = {"device_ids": [0]} if cuda else {}
        ddp = DDP(make_model(torch, args.width).to(device), bucket_cap_mb=bucket_mb, **kwargs)
        if stock is not None:
            ddp.register_comm_hook(None, stock)
        if hook_config is not None:
            acspeed._patch.install_hook(ddp, _runtime.core().CommConfig.from_json(hook_config)[0], dist.group.WORLD)
        return ddp

    results, ok = [], True
    for algorithm, streams, compression in CONFIGS:
        name = f"{algorithm}/s{streams}/{compression}"
        reference = train(torch, wrap(stock=default_hooks.fp16_compress_hook if compression == "fp16" else None),
                          batches)
        ddp = wrap(config_json(algorithm, streams, compression, bucket_mb))
        lanes = len(acspeed._patch.state_of(ddp).lanes)
        if cuda:
            from torch.profiler import ProfilerActivity, profile, schedule
            trace_path = os.path.join(args.out, f"trace-{name.replace('/', '-')}-rank{rank}.json")
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                         schedule=schedule(wait=0, warmup=WARMUP, active=PROFILED, repeat=1),
                         on_trace_ready=lambda done: done.export_chrome_trace(trace_path)) as prof:
                mine = train(torch, ddp, batches, profiler=prof)
            torch.cuda.synchronize()
            with open(trace_path) as f:
                trace = json.load(f)
            seen = dict(kernel_overlap(kernels_from_trace(trace)), host_syncs=host_syncs_in_backward(trace))
        else:
            mine, seen = train(torch, ddp, batches), {}
        result = {"config": name, "lanes": lanes, "identical": bool(torch.equal(mine, reference)),
                  "max_abs_diff": (mine - reference).abs().max().item(), **seen}
        result["problems"] = problems(result, compression)
        ok = ok and not result["problems"]
        results.append(result)
        print(f"ACSPEED_CHECK rank {rank}: {name}: {'; '.join(result['problems']) or 'ok'} {seen}", flush=True)
        del ddp
    with open(os.path.join(args.out, f"result-rank{rank}.json"), "w") as f:
        json.dump(results, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
