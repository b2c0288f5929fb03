"""acspeed: one line, `import acspeed`, applies the communication config tuned by `acspeed-tune` for
this instance type and model to every DistributedDataParallel model the script builds.

    import acspeed
    acspeed.configure(precision="amp")   # optional: the lookup key's precision (or ACSPEED_PRECISION)
    acspeed.configure(grad_scaler=True)  # optional: AMP's GradScaler is in use (else detected)

ACSPEED_DISABLE=1 turns it off; ACSPEED_CONFIG=file.json forces a config; ACSPEED_STRICT=1 turns its
warnings into errors; ACSPEED_SHARE_GPUS=1 lets a node's ranks share fewer GPUs (acspeed.share_gpus).
Importing is cheap: the C++ runtime and the hook machinery load at the first DDP construction; on a
CUDA machine what NCCL reads at its first communicator (NCCL's sockets, acspeed.instance_knobs) is
looked up at the first process group (acspeed.first_group), before torch builds it."""
from . import _exit, _patch, first_group, nccl

from ._patch import attach_observer

__all__ = ["configure", "state_dict", "load_state_dict", "attach_observer"]


def configure(precision=None, grad_scaler=None) -> None:
    """precision: the training precision used in the lookup key ("amp", "fp32", "fp16", "bf16";
    None: take ACSPEED_PRECISION, else any precision matches). Call before building DDP.
    grad_scaler: whether AMP's GradScaler is in use (True/False; None: detected, see
    acspeed.scaler). With a scaler, compressed gradients are not checked for NaN/Inf: they reach the scaler.
    Each call sets both (a value left out returns to None)."""
    from . import decision, scaler  # noqa: PLC0415
    decision.set_precision(precision)
    scaler.configure(grad_scaler)


def state_dict(ddp) -> dict:
    """What a checkpoint must keep of acspeed's comm hook on this DDP model, on this rank, for an
    exact resumption: with compression powersgd, each bucket's Q factor (warm start) and error-
    feedback residual of every gradient matrix, by parameter name, and the count of synchronised
    steps (the start step); nothing otherwise ({"version": 1, "compression": ..., "tensors": {}}). Tensors are CPU copies. Save it per rank
    (the residuals differ between ranks) next to the model and optimizer state."""
    from .engine import powersgd  # noqa: PLC0415
    state = _patch.state_of(ddp)
    if state is not None and state.powersgd is not None:
        return state.powersgd.state_dict()
    compression = state.config.compression if state is not None else "none"
    return {"version": powersgd.STATE_VERSION, "compression": compression, "tensors": {}}


def load_state_dict(ddp, saved: dict) -> None:
    """Restores what state_dict(ddp) returned on this rank, before the first step of the resumed
    run; each tensor's shapes are checked when it is next reduced. ValueError when the
    state does not fit this model's config (another compression or rank, another model)."""
    state = _patch.state_of(ddp)
    if state is not None and state.powersgd is not None:
        state.powersgd.load_state_dict(saved)
        return
    if not isinstance(saved, dict) or saved.get("tensors"):
        compression = state.config.compression if state is not None else "none"
        raise ValueError(f"acspeed.load_state_dict: the state holds PowerSGD factors, but this DDP model's "
                         f"compression is {compression}")


def _start() -> None:
    """Points NCCL at the bundled plugin and patches DDP, unless this environment's Python or torch
    is one the installed package does not support: then one warning naming the versions, and DDP
    runs untouched (ACSPEED_STRICT=1, or no torch at all: ImportError)."""
    import importlib.util  # noqa: PLC0415
    from . import _supported  # noqa: PLC0415
    _exit.install()  # a clean exit with gloo (see _exit), also with ACSPEED_DISABLE=1
    unsupported = _supported.problems()
    if not unsupported:
        nccl.export_plugin()
        first_group.install()  # NCCL's variables (shared GPUs, sockets) at the first process group
        _patch.install()
        return
    from . import _runtime  # noqa: PLC0415
    message = "; ".join(unsupported)
    if importlib.util.find_spec("torch") is None or _runtime.strict_or_off():
        raise ImportError(message)
    from . import _log  # noqa: PLC0415
    _log.warn(f"{message}: not applied, DDP runs with its defaults")


_start()
