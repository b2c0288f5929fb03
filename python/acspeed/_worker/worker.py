"""The trial worker of `acspeed-tune`: long-lived DDP ranks that run one trial per tuner request.

    python -m torch.distributed.run --nproc_per_node 2 ... -m acspeed._worker.worker \
        --model resnet18 --batch-size 8 --image-size 64 --precision fp32 --control /tmp/.../control.sock

`acspeed-tune` launches it once under torchrun; it is not meant to be run by hand. Rank 0 connects
to the tuner's Unix socket (`--control`) and speaks the versioned JSON-lines protocol documented in
tuner/src/protocol.h; it broadcasts each request to the other ranks over a gloo group of its own.

A trial: the model gets its initial weights back, is (re)wrapped in DDP with the trial's config
(`acspeed.apply.wrap`, the same code `import acspeed` runs in training jobs), runs `warmup` untimed
steps (with compression powersgd, at least up to two steps past its start step, so that the timed
steps are compressed) and `steps` timed steps on one fixed batch, and reports the per-step time (max
over ranks), the loss of every step (mean over ranks; same weights and batch every trial, so the
trajectories of two configs are comparable), whether every loss stayed finite, and the probe
breakdown (acspeed.probes) when the probes are built.

Every mode runs the one step loop (steps.py) with its own callback: the timed trial and the
compute-only step (timing.py), and what a request may ask for the convergence guard
(tuner/include/acspeed/tuner/convergence_guard.h), after the trial: a gradient-fidelity window
(`fidelity_steps` > 0) and a loss trajectory (`trajectory_steps` T > 0, on the batches made when the
workers start, batches.py), both in convergence_guard.py. PowerSGD's own compute time per step
(acspeed.engine.powersgd) is reported as compression_s. Models: models.py; the model and --data
check that `acspeed-tune --dry-run` runs too: check.py.

Any error in a trial is reported by rank 0 (when it is rank 0's) and ends the workers: a rank that
failed inside a collective cannot rejoin the others, so the tuner records the trial as failed and
starts fresh workers.

What the tuner needs to name the rank that failed (tuner/src/rank_failure.h): with `--log-prefix
PREFIX`, each rank writes its output (Python's and the C++ libraries') to PREFIX-rankR.log, and a
rank that catches an error in a trial writes PREFIX-rankR.failed.json (its error and the time it
caught it, on the node's monotonic clock: the first rank to fail is the cause, the others lost it as
a peer). With `--stack-dump-s S`, a trial still running after S seconds dumps every rank's Python
stack into its log (faulthandler), so a hung trial says where each rank was.
"""
import argparse
import collections
import ctypes
import faulthandler
import json
import os
import signal
import socket
import sys
import time
import traceback

import torch
import torch.distributed as dist

from acspeed import _log, _patch, _runtime, _supported, share_gpus
from acspeed._worker import batches, check, convergence_guard, models, protocol, steps, timing
from acspeed.engine import powersgd

_PR_SET_PDEATHSIG = 1
# This module's name, which the tuner launches (tuner/src/worker_module.h, the one place it is
# written) and looks for in the failure lines below; `-m` runs it as __main__.
_MODULE = __spec__.name if __spec__ is not None else __name__


def _die_with_parent() -> None:
    """torchrun starts each rank in its own session, so a killed torchrun (or tuner) would leave the
    ranks behind: ask the kernel to kill this rank when its parent dies."""
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _parse_args(argv):
    parser = argparse.ArgumentParser(prog=f"python -m {_MODULE}", description=__doc__.split("\n")[0])
    check.add_arguments(parser)
    parser.add_argument("--precision", choices=_runtime.core().PRECISIONS, default="fp32")
    parser.add_argument("--control", help="the tuner's Unix socket (rank 0 only)")
    parser.add_argument("--log-prefix", help="each rank logs to PREFIX-rankR.log, its trial error to "
                        "PREFIX-rankR.failed.json")
    parser.add_argument("--stack-dump-s", type=float, help="dump every rank's stack into its log when a trial "
                        "runs longer than this")
    return parser.parse_args(argv)


def _log_to_own_file(prefix: str, rank: int) -> None:
    """Points this rank's stdout and stderr (file descriptors 1 and 2, so the C++ libraries' output too)
    at PREFIX-rankR.log."""
    fd = os.open(f"{prefix}-rank{rank}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _record_failure(prefix, rank: int, trial, error: str) -> None:
    """PREFIX-rankR.failed.json: what this rank caught and when (CLOCK_MONOTONIC, one clock per node)."""
    if not prefix:
        return
    record = {"rank": rank, "trial": trial, "error": error, "monotonic_s": time.monotonic()}
    with open(f"{prefix}-rank{rank}.failed.json", "w", encoding="utf-8") as f:
        json.dump(record, f)


class Trainer:
    """One rank's model, batch and DDP wrapper; run() is one trial."""

    def __init__(self, args, device: torch.device):
        # DDP's constructor imports torch._dynamo (seconds on a busy machine): paid here, at start-up,
        # not inside the first trial's timeout.
        import torch._dynamo  # noqa: F401, PLC0415
        self.device = device
        self.precision = args.precision
        self.autocast = steps.autocast_for(args.precision, device)
        self.batch_size = args.batch_size
        # The model and every batch of the trials and trajectories, made on the CPU and checked as
        # `acspeed-tune --dry-run` checks them (check.py); the trials' batch then lives on the device.
        model, first, made = check.model_and_batches(args, dist.get_rank(), dist.get_world_size())
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(args.precision)
        self.model = model.to(device=device, dtype=dtype) if dtype else model.to(device)

        def cast(batch):
            inputs, targets = batch
            return (inputs.to(dtype) if dtype is not None and inputs.is_floating_point() else inputs), targets

        self.batches = [cast(batch) for batch in made[:args.trajectory_steps]]
        inputs, targets = cast(first)
        self.inputs, self.targets = inputs.to(device), targets.to(device)
        check.model_fits(args, self.model, (self.inputs, self.targets))
        self.initial_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        self.ddp = None
        self.probe = None
        self.probe_name = ""
        try:
            from acspeed import probes  # noqa: PLC0415 - optional: the probes are a separate build
            self._probes = probes
        except ImportError:
            self._probes = None

    def params(self):
        return [p for p in self.model.parameters() if p.requires_grad]

    def rewrap(self, config, mode: str) -> float:
        """The initial weights back, then the model wrapped for `mode` (ddp, hooked: acspeed's hook
        even where the config needs none; compute: no DDP). Returns the seconds it took."""
        from acspeed import apply  # noqa: PLC0415 - imports the DDP patch; the worker is its only caller here
        if self.probe is not None:
            self.probe.close()
            self.probe = None
        self.ddp = None
        self.model.load_state_dict(self.initial_state)
        start = time.perf_counter()
        if mode == "compute":  # communication off: the bare model, no DDP
            apply.release(self.model)
            return time.perf_counter() - start
        kwargs = {"device_ids": [self.device.index]} if self.device.type == "cuda" else {}
        self.ddp = apply.wrap(self.model, config, hooked=mode == "hooked", **kwargs)
        if self._probes is not None:
            self.probe = self._probes.StepProbe(self.ddp)
            self.probe_name = self.probe.backend
            if _patch.state_of(self.ddp) is not None:
                _patch.attach_observer(self.ddp, self.probe)
        return time.perf_counter() - start

    def _sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def run(self, request: dict, control_group) -> dict:
        """One trial: the timed steps, then the convergence guard's fidelity window and trajectory
        when the request asks for them (convergence_guard.py)."""
        config = _trial_config(request)
        mode = request.get("mode", "ddp")
        if mode not in ("ddp", "compute", "hooked"):
            raise ValueError(f"trial mode '{mode}' is not one of ddp, compute, hooked")
        rebuild_s = self.rewrap(config, mode)
        if mode == "compute":
            return timing.compute_only(self, request, control_group, rebuild_s)
        optimizer, scaler = steps.training(self.ddp.parameters(), self.precision, self.device)
        result = timing.timed(self, request, config, optimizer, scaler, control_group, rebuild_s)
        fidelity_steps = int(request.get("fidelity_steps", 0))
        if fidelity_steps > 0 and config.compression_info.changes_numerics and result["finite"]:
            start = time.perf_counter()
            result.update(convergence_guard.fidelity(self, scaler, control_group, fidelity_steps))
            result["fidelity_s"] = time.perf_counter() - start
        trajectory_steps = int(request.get("trajectory_steps", 0))
        if trajectory_steps > len(self.batches):
            raise ValueError(f"trajectory of {trajectory_steps} steps asked, the workers made {len(self.batches)} "
                             f"batches (--trajectory-steps)")
        if trajectory_steps > 0 and result["finite"]:
            start = time.perf_counter()
            trajectory = convergence_guard.trajectory(self, config, control_group, trajectory_steps)
            result["trajectory_s"] = time.perf_counter() - start
            if trajectory is None:  # JSON has no NaN
                result["trajectory_finite"] = False
            else:
                result["trajectory"] = trajectory
        if not result["finite"]:  # JSON has no NaN: the flag says it, the values are dropped
            for key in ("loss_first", "loss", "losses"):
                result.pop(key)
        return result


class Control:
    """Rank 0's line-oriented connection to the tuner."""

    def __init__(self, path: str):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.reader = self.sock.makefile("r", encoding="utf-8")

    def send(self, message: dict) -> None:
        self.sock.sendall(protocol.encode(message))

    def receive(self) -> dict:
        line = self.reader.readline()
        if not line:  # the tuner is gone
            return protocol.stop()
        return protocol.decode(line)


def _trial_config(request: dict):
    """The trial's CommConfig, validated by the C++ runtime (ValueError names a bad value), built
    once from the message and handed to everything the trial does; an unknown key is logged."""
    config, warnings = _runtime.core().CommConfig.from_json(json.dumps(request["config"]))
    for warning in warnings:
        _log.warn(f"trial {request['id']}: {warning}")
    return config


def _gradient_layout(params) -> dict:
    """The gradients' shapes, from which the tuner counts the bytes each compression sends
    (tuner/include/acspeed/tuner/gradient_layout.h): matrices as PowerSGD factors them, the others
    whole; identical entries counted."""
    matrices, vectors = collections.Counter(), collections.Counter()
    for p in params:
        sides = powersgd.matrix_sides(tuple(p.shape))
        if sides is not None:
            matrices[(*sides, p.element_size())] += 1
        elif p.numel() > 0:
            vectors[(p.numel(), p.element_size())] += 1
    return {"matrices": [[*key, count] for key, count in matrices.items()],
            "vectors": [[*key, count] for key, count in vectors.items()]}


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def main(argv=None) -> int:
    _die_with_parent()
    args = _parse_args(argv)
    if args.log_prefix:
        _log_to_own_file(args.log_prefix, int(os.environ.get("RANK", "0")))
    os.environ["ACSPEED_STRICT"] = "1"  # a config the hooks cannot realise must fail the trial, not fall back
    use_cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    gpu = share_gpus.device_for(local_rank) if use_cuda else None  # local rank mod GPUs when shared
    if use_cuda:
        torch.cuda.set_device(gpu)
    device = torch.device("cuda", gpu) if use_cuda else torch.device("cpu")
    dist.init_process_group(backend="nccl" if use_cuda else "gloo", **_supported.device_id_kwargs(device))
    rank = dist.get_rank()
    control_group = dist.new_group(backend="gloo")
    control = Control(args.control) if rank == 0 else None
    if args.seed is not None:  # the initial weights every trajectory starts from (convergence_guard.py)
        torch.manual_seed(args.seed)
    try:
        trainer = Trainer(args, device)
        from acspeed.decision import model_signature  # noqa: PLC0415 - the key `import acspeed` looks up
        signature = model_signature(trainer.model)
        nnodes = _runtime.core().node_count(dist.get_world_size())  # counted as `import acspeed` counts them
    except Exception as error:  # noqa: BLE001 - reported to the tuner, then the workers end
        _record_failure(args.log_prefix, rank, None, _error_text(error))
        print(f"{_MODULE} rank {rank}: setup failed: {_error_text(error)}\n{traceback.format_exc()}",
              file=sys.stderr, flush=True)
        if control is not None:
            usage = isinstance(error, (models.ModelSpecError, batches.DataSpecError))
            control.send(protocol.fatal(str(error) if usage else _error_text(error), usage))
        return 1
    if control is not None:
        from acspeed.versions import job_versions  # noqa: PLC0415 - what `import acspeed` compares
        versions = job_versions()
        params = trainer.params()
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", dist.get_world_size()))
        control.send(protocol.hello(world_size=dist.get_world_size(), nnodes=nnodes, local_world_size=local_world,
                                    backend=dist.get_backend(), device=device.type, model=args.model,
                                    model_signature=signature, param_count=sum(p.numel() for p in params),
                                    param_bytes=sum(p.numel() * p.element_size() for p in params),
                                    gradients=_gradient_layout(params), torch_version=versions["torch"],
                                    nccl_version=versions["nccl"], cuda_version=versions["cuda"],
                                    torch_nccl_version=versions["torch_nccl"],
                                    torch_cuda_version=versions["torch_cuda"],
                                    process_group=versions["process_group"],
                                    batch_size=args.batch_size, precision=args.precision,
                                    probe="" if trainer._probes is None else "acspeed.probes"))
    while True:
        box = [control.receive() if control is not None else None]
        dist.broadcast_object_list(box, src=0, group=control_group)
        request = box[0]
        if request["type"] == "stop":
            break
        if args.stack_dump_s:
            faulthandler.dump_traceback_later(args.stack_dump_s)
        try:
            result = trainer.run(request, control_group)
        except Exception as error:  # noqa: BLE001 - the trial failed: say why, then end these workers
            _record_failure(args.log_prefix, rank, request["id"], _error_text(error))
            print(f"{_MODULE} rank {rank}: trial {request['id']} failed: {_error_text(error)}\n"
                  f"{traceback.format_exc()}", file=sys.stderr, flush=True)
            if control is not None:
                control.send(protocol.failed(request["id"], _error_text(error)))
            return 1
        finally:
            faulthandler.cancel_dump_traceback_later()
        if control is not None:
            control.send(result)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
