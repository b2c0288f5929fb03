"""acspeed: one line, `import acspeed`, applies the communication config tuned by `acspeed-tune` for
this instance type and model to every DistributedDataParallel model the script builds.

    import acspeed
    acspeed.configure(precision="amp")   # optional: the lookup key's precision (or ACSPEED_PRECISION)
    acspeed.configure(grad_scaler=True)  # optional: AMP's GradScaler is in use (else detected)

ACSPEED_DISABLE=1 turns it off; ACSPEED_CONFIG=file.json forces a config; ACSPEED_STRICT=1 turns its
warnings into errors. Importing is cheap: the C++ runtime and the hook machinery load at the first DDP
construction."""
from . import _patch, nccl

__all__ = ["configure"]


def configure(precision=None, grad_scaler=None) -> None:
    """precision: the training precision used in the lookup key ("amp", "fp32", "fp16", "bf16";
    None: take ACSPEED_PRECISION, else any precision matches). Call before building DDP.
    grad_scaler: whether AMP's GradScaler is in use (True/False; None: detected, see
    acspeed.scaler). With a scaler, compressed gradients are not guarded: NaN/Inf reach the scaler.
    Each call sets both (a value left out returns to None)."""
    from . import decision, scaler  # noqa: PLC0415
    decision.set_precision(precision)
    scaler.configure(grad_scaler)


nccl.export_plugin()
_patch.install()
