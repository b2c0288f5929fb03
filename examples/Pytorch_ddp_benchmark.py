"""Synthetic-data DDP training benchmark (the AIACC-ACSpeed benchmark's CLI and output line).

    python -m torch.distributed.run --nnodes 1 --node_rank 0 --nproc_per_node 8 --master_addr localhost \
        --master_port 6006 examples/Pytorch_ddp_benchmark.py --model resnet50 --precision amp

prints, on rank 0, for the per-step time (max over ranks) at p50/p75/p90/p95 and the per-device
throughput (per-device batch / step time):

    8 GPUs -- 1M/8G: p50: 0.054s 597/s p75: 0.054s 592/s p90: 0.056s 569/s p95: 0.056s 568/s

"1M/8G" = machines / devices. NCCL on GPUs, gloo on CPUs (with small defaults so a CPU run ends
quickly). Comment out `import acspeed` for the plain DDP baseline.

When the applied config compresses gradients only from a start step on (PowerSGD's start step), the
warm-up covers that step plus a few, so that the timed steps measure the compressed steady state; one
line before the benchmark line says so. An explicit --warmup still wins, with a note when some timed
steps ran before compression started.
"""
import argparse
import datetime
import importlib
import importlib.util
import inspect
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import acspeed  # noqa: F401  - the one line: applies the tuned communication config to DDP

JSON_VERSION = 1
PERCENTILES = (50, 75, 90, 95)
# (batch size, image size, warm-up steps, timed steps) when not given.
GPU_DEFAULTS = (32, 224, 10, 50)
CPU_DEFAULTS = (8, 64, 2, 10)
# Warm-up steps past the step from which the applied config compresses (as the tuner's trials).
STEADY_STATE_STEPS = 2


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--model", default="resnet50",
                        help="a torchvision classification model name, or pkg.module:name or path/to/file.py:name "
                             "naming a torch.nn.Module class, a function returning a module, or a function returning "
                             "(model, make_batch) where make_batch(batch_size) returns (inputs, targets); without "
                             "make_batch the batch is random images (batch, 3, S, S) with labels over the output's "
                             "last dimension")
    # Its own list of acspeed's precisions: the script must run with `import acspeed` commented out.
    parser.add_argument("--precision", default="fp32", choices=("amp", "fp32", "fp16", "bf16"),
                        help="amp = autocast (fp16 on GPU, bf16 on CPU)")
    parser.add_argument("--batch-size", type=int, help=f"per device (default {GPU_DEFAULTS[0]} GPU, {CPU_DEFAULTS[0]} CPU)")
    parser.add_argument("--image-size", type=int, help=f"default {GPU_DEFAULTS[1]} GPU, {CPU_DEFAULTS[1]} CPU")
    parser.add_argument("--warmup", type=int, help=f"untimed steps (default {GPU_DEFAULTS[2]} GPU, {CPU_DEFAULTS[2]} CPU)")
    parser.add_argument("--steps", type=int, help=f"timed steps (default {GPU_DEFAULTS[3]} GPU, {CPU_DEFAULTS[3]} CPU)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as versioned JSON")
    parser.add_argument("--profile", action="store_true",
                        help="also measure each timed step with acspeed's probe (CUPTI on GPU, timers on "
                             "CPU) and print compute / communication / exposed communication per percentile")
    parser.add_argument("--overwrite", action="store_true", help="let --json replace an existing file")
    args = parser.parse_args(argv)
    args.warmup_given = args.warmup is not None
    defaults = GPU_DEFAULTS if torch.cuda.is_available() else CPU_DEFAULTS
    for name, default in zip(("batch_size", "image_size", "warmup", "steps"), defaults):
        if getattr(args, name) is None:
            setattr(args, name, default)
    for name, minimum in (("batch_size", 1), ("image_size", 1), ("warmup", 0), ("steps", 1)):
        if getattr(args, name) < minimum:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)} must be >= {minimum}")
    if args.json and os.path.exists(args.json) and not args.overwrite:
        parser.error(f"--json {args.json} exists; pass --overwrite to replace it")
    return args


def image_batches(model, image_size: int, device, classes=None):
    """make_batch(batch_size) -> (random images (batch, 3, S, S), integer labels below `classes`;
    None: the last dimension of the model's output, counted at the first call)."""
    def make_batch(batch_size):
        generator = torch.Generator(device=device).manual_seed(0)
        inputs = torch.randn(batch_size, 3, image_size, image_size, device=device, generator=generator)
        count = classes
        if count is None:
            try:
                with torch.no_grad():
                    output = model.eval()(inputs[:1])
            except Exception as error:  # noqa: BLE001 - the user's model: named in the message
                raise SystemExit(f"--model: the model rejects the default batch of shape {tuple(inputs.shape)} "
                                 f"(random images): {type(error).__name__}: {error}; give make_batch") from error
            finally:
                model.train()
            output = output[0] if isinstance(output, (tuple, list)) else output
            if not (isinstance(output, torch.Tensor) and output.dim() == 2):
                raise SystemExit(f"--model: for the default batch of shape {tuple(inputs.shape)} the model returns "
                                 f"{type(output).__name__} {tuple(getattr(output, 'shape', ()))}, not (batch, "
                                 f"classes) scores; give make_batch")
            count = output.shape[1]
        targets = torch.randint(0, count, (batch_size,), device=device, generator=generator)
        return inputs, targets
    return make_batch


def build_model(name: str, image_size: int, device):
    """(model, make_batch) for --model: a torchvision classification model, or pkg.module:name or
    path/to/file.py:name naming a torch.nn.Module class, a function returning a module, or a function
    returning (model, make_batch). acspeed's own copy (acspeed/_worker/models.py) is not used: this
    script must run with `import acspeed` commented out."""
    if ":" not in name:
        import torchvision  # noqa: PLC0415 - only for torchvision names
        known = torchvision.models.list_models(module=torchvision.models)
        if name not in known:
            raise SystemExit(f"--model {name} is not a torchvision classification model "
                             f"(e.g. {', '.join(sorted(known)[:8])}, ...) nor pkg.module:name or path/to/file.py:name")
        model = torchvision.models.get_model(name, weights=None).to(device)
        return model, image_batches(model, image_size, device, classes=1000)
    target, _, attribute = name.rpartition(":")
    if target.endswith(".py") or os.sep in target:  # a file, relative to the current folder
        path = os.path.abspath(target)
        if not os.path.isfile(path):
            raise SystemExit(f"--model {name}: no file {path}")
        if os.path.dirname(path) not in sys.path:  # its own imports resolve as under `python path/to/file.py`
            sys.path.insert(0, os.path.dirname(path))
        spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:  # from the current folder first, as acspeed-tune imports it from the folder it was started in
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        module = importlib.import_module(target)
    found = getattr(module, attribute, None)
    if found is None or isinstance(found, torch.nn.Module) or not callable(found):
        raise SystemExit(f"--model {name}: {attribute} is {type(found).__name__}, not a torch.nn.Module class or a "
                         f"function")
    try:
        built = found()
    except TypeError as error:
        raise SystemExit(f"--model {name}: {attribute}{inspect.signature(found)} cannot be called without "
                         f"arguments: {error}") from error
    if isinstance(built, torch.nn.Module):
        model = built.to(device)
        return model, image_batches(model, image_size, device)
    if isinstance(built, tuple) and len(built) == 2 and isinstance(built[0], torch.nn.Module) and callable(built[1]):
        return built[0].to(device), built[1]
    raise SystemExit(f"--model {name}: {attribute}() returned {type(built).__name__}, not a torch.nn.Module nor "
                     f"(model, make_batch)")


def compression_start_step(ddp) -> int:
    """The step from which the config `import acspeed` applied compresses gradients (PowerSGD's start
    step); 0 when it compresses from the first step, or not at all, or acspeed is not imported."""
    if "acspeed" not in sys.modules:
        return 0
    from acspeed import _patch  # noqa: PLC0415 - only with `import acspeed`
    state = _patch.state_of(ddp)
    return state.powersgd.start_step if state is not None and state.powersgd is not None else 0


def steady_warmup(warmup: int, given: bool, start_step: int, steps: int):
    """(warm-up steps, the line that says why, or None) for a config that compresses from
    `start_step` on: the warm-up covers it plus STEADY_STATE_STEPS unless --warmup was given."""
    if start_step <= 0:
        return warmup, None
    if not given:
        warmup = max(warmup, start_step + STEADY_STATE_STEPS)
        return warmup, (f"warm-up: {warmup} steps, past step {start_step} from which the applied config compresses "
                        f"gradients (PowerSGD): the timed steps measure the compressed steady state")
    uncompressed = min(steps, max(0, start_step - warmup))
    if uncompressed == 0:
        return warmup, None
    return warmup, (f"note: --warmup {warmup}: {uncompressed} of the {steps} timed steps ran before compression "
                    f"started (the applied config compresses from step {start_step}; omit --warmup to time "
                    f"the steady state)")


def machines(world_size: int) -> int:
    """The "NM" of the output line, counted in the order of acspeed's node-count rule
    (runtime/include/acspeed/node_count.h); a copy of its own, as the script must run with `import acspeed` commented out."""
    for name in ("NNODES", "GROUP_WORLD_SIZE"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    return max(1, world_size // max(local, 1))


def summary_line(step_times, batch_size: int, world_size: int, nnodes: int, gpu: bool) -> str:
    unit = "GPUs" if gpu else "CPUs"
    parts = [f"{world_size} {unit} -- {nnodes}M/{world_size}{unit[0]}:"]
    for q in PERCENTILES:
        seconds = float(np.percentile(step_times, q))
        parts.append(f"p{q}: {seconds:.3f}s {batch_size / seconds:.0f}/s")
    return " ".join(parts)


def process_group_impl() -> str:
    """The implementation running the default process group: get_backend_impl().name() (torch >= 2.14:
    "nccl2", "nccl" for the classic NCCL group, "gloo"), else the backend's name; a copy of
    acspeed.versions.process_group_impl, as the script must run with `import acspeed` commented out."""
    impl = getattr(dist, "get_backend_impl", None)
    return impl().name() if impl is not None else str(dist.get_backend())


def relevant_environment() -> dict:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(("ACSPEED_", "NCCL_", "CUDA_"))}


def main(argv=None) -> None:
    args = parse_args(argv)
    acspeed_imported = "acspeed" in sys.modules  # before --profile imports acspeed.probes
    # Lets `import acspeed` key its lookup by precision; harmless when that line is commented out.
    os.environ.setdefault("ACSPEED_PRECISION", args.precision)
    gpu = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if gpu:
        # Modulo the GPUs: with ACSPEED_SHARE_GPUS=1, `import acspeed` lets more ranks than GPUs share them.
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    # device_id (CUDA only, where this torch's init_process_group has it) binds the default group to
    # this rank's GPU: NCCL connects now, and torch 2.15's nccl2 uses that GPU (acspeed's docs/nccl2.md).
    # Checked here, not through acspeed: this script must run with `import acspeed` commented out.
    bind = {"device_id": device} if gpu and "device_id" in inspect.signature(dist.init_process_group).parameters \
        else {}
    dist.init_process_group("nccl" if gpu else "gloo", timeout=datetime.timedelta(minutes=10), **bind)
    rank, world_size = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model, make_batch = build_model(args.model, args.image_size, device)
    if args.precision in ("fp16", "bf16"):
        model = model.to(torch.float16 if args.precision == "fp16" else torch.bfloat16)
    ddp = DDP(model, device_ids=[device.index] if gpu else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    inputs, targets = make_batch(args.batch_size)
    if args.precision in ("fp16", "bf16"):
        inputs = inputs.to(next(model.parameters()).dtype)
    autocast_dtype = (torch.float16 if gpu else torch.bfloat16) if args.precision == "amp" else None
    scaler = torch.amp.GradScaler("cuda", enabled=gpu and args.precision == "amp")
    loss_fn = torch.nn.CrossEntropyLoss()
    probe = None
    if args.profile:
        import acspeed  # noqa: PLC0415
        from acspeed import _patch  # noqa: PLC0415
        from acspeed.probes import StepProbe  # noqa: PLC0415
        probe = StepProbe(ddp)
        if _patch.state_of(ddp) is not None:  # acspeed's hook reports per-bucket times
            acspeed.attach_observer(ddp, probe)

    def step(probe=None):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=autocast_dtype or torch.float32, enabled=autocast_dtype is not None):
            loss = loss_fn(ddp(inputs), targets)
        scaler.scale(loss).backward()
        if probe:
            probe.backward_end()
        scaler.step(optimizer)
        scaler.update()

    args.warmup, warmup_line = steady_warmup(args.warmup, args.warmup_given, compression_start_step(ddp), args.steps)
    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        if gpu:
            torch.cuda.synchronize()
        begin = time.perf_counter()
        if probe:
            probe.step_begin()
        step(probe)
        if probe:
            probe.step_end()
        if gpu:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - begin)
    step_times = torch.tensor(times, dtype=torch.float64, device=device)
    dist.all_reduce(step_times, op=dist.ReduceOp.MAX)  # a step lasts as long as its slowest rank
    step_times = step_times.cpu().numpy()
    profile = probe.summary() if probe else None  # gathers over ranks, outside the timed steps
    nnodes = machines(world_size)
    if rank == 0:
        line = summary_line(step_times, args.batch_size, world_size, nnodes, gpu)
        if warmup_line:
            print(warmup_line, flush=True)
        print(line, flush=True)
        if profile:
            print(StepProbe.format(profile), flush=True)
        if args.json:
            record = {
                "version": JSON_VERSION, "command": [sys.executable] + sys.argv,
                "model": args.model, "precision": args.precision, "batch_size_per_device": args.batch_size,
                "image_size": args.image_size, "warmup": args.warmup, "steps": args.steps,
                "world_size": world_size, "nnodes": nnodes, "device": "gpu" if gpu else "cpu",
                "acspeed": acspeed_imported,
                "step_times_s": [float(t) for t in step_times], "ranks_combined": "max over ranks per step",
                "percentiles": {f"p{q}": {"step_time_s": float(np.percentile(step_times, q)),
                                          "samples_per_s_per_device": args.batch_size / float(np.percentile(step_times, q))}
                                for q in PERCENTILES},
                "line": line, "warmup_note": warmup_line,
                "profile": profile,
                "versions": {"torch": torch.__version__, "python": sys.version.split()[0],
                             "cuda": torch.version.cuda,
                             "nccl": ".".join(map(str, torch.cuda.nccl.version())) if gpu else None,
                             "process_group": process_group_impl()},
                "environment": relevant_environment(),
            }
            with open(args.json, "w" if args.overwrite else "x") as out:
                json.dump(record, out, indent=2)
                out.write("\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
