"""Whether AMP's GradScaler is in use. It turns the non-finite fallback off: a non-finite gradient
must reach the scaler unchanged so that it skips the step and backs the scale off (re-sending the
bucket uncompressed would hide an fp16 overflow, and the scale would never come down).

In order, the first that answers wins:
  1. acspeed.configure(grad_scaler=True|False): what the user said;
  2. a torch.amp.GradScaler (or torch.cuda.amp.GradScaler) with enabled=True has scaled a loss in
     this process: acspeed wraps GradScaler.scale at import (the wrapper counts, changes nothing);
  3. the precision (acspeed.configure(precision=...) or ACSPEED_PRECISION) is amp or fp16 and the
     model is on CUDA, as torch's AMP recipe uses a scaler there.
Every rank runs the same training script, so every rank reaches the same answer at the same step;
the hook reads it once per step, at the step's first bucket."""
from typing import Optional

_configured: Optional[bool] = None
_scaled_losses = 0


def configure(grad_scaler: Optional[bool]) -> None:
    if grad_scaler is not None and not isinstance(grad_scaler, bool):
        raise ValueError(f"grad_scaler={grad_scaler!r} is not True, False or None")
    global _configured
    _configured = grad_scaler


def note_scaled_loss() -> None:
    """Called by the GradScaler.scale wrapper when the scaler is enabled."""
    global _scaled_losses
    _scaled_losses += 1


def in_use(device_type: str, precision: Optional[str]) -> bool:
    if _configured is not None:
        return _configured
    if _scaled_losses > 0:
        return True
    return device_type == "cuda" and precision in ("amp", "fp16")
