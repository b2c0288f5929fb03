"""The worker's one step loop: every mode (the timed trial, the compute-only step, the fidelity
window, the trajectory) runs train_steps with its own StepCallback; the optimizer and the
GradScaler are built in one place (training)."""
import contextlib
from typing import Callable, Iterable, List, Optional, Tuple

import torch


def loss_of(output, target) -> torch.Tensor:
    """Cross-entropy for integer targets, mean squared error otherwise (in fp32)."""
    if isinstance(output, (tuple, list)):
        output = output[0]
    if not target.is_floating_point():
        return torch.nn.functional.cross_entropy(output.float(), target)
    return torch.nn.functional.mse_loss(output.float(), target.float())


def training(parameters, precision: str, device: torch.device) -> Tuple[torch.optim.Optimizer, torch.amp.GradScaler]:
    """The optimizer (SGD, lr 0.01, momentum 0.9) and the GradScaler (on with amp on CUDA) of every mode."""
    optimizer = torch.optim.SGD(parameters, lr=0.01, momentum=0.9)
    return optimizer, torch.amp.GradScaler(enabled=precision == "amp" and device.type == "cuda")


def autocast_for(precision: str, device: torch.device) -> Callable[[], contextlib.AbstractContextManager]:
    """The autocast context of a step: bf16 on the CPU / fp16 on CUDA under amp, else off."""
    if precision != "amp":
        return lambda: torch.autocast(device.type, enabled=False)
    dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    return lambda: torch.autocast(device.type, dtype=dtype)


class StepCallback:
    """What a mode does around each step of train_steps; every method does nothing unless overridden."""

    def begin(self, index: int) -> None:
        """Before the step (before the gradients are zeroed)."""

    def forward_end(self, index: int) -> None:
        """After the forward pass and the loss."""

    def backward_end(self, index: int) -> None:
        """After the backward pass (the gradients are synchronised, under DDP)."""

    def end(self, index: int) -> None:
        """After the optimizer step (or the backward pass, without an optimizer)."""


def train_steps(module, batches: Iterable, autocast, scaler: torch.amp.GradScaler,
                optimizer: Optional[torch.optim.Optimizer] = None,
                callback: Optional[StepCallback] = None) -> List[float]:
    """One step per (inputs, targets) of `batches`: zero the gradients, forward and loss under
    `autocast()`, the scaled backward, then, with an optimizer, its step through the scaler.
    Returns each step's loss."""
    callback = callback if callback is not None else StepCallback()
    losses = []
    for index, (inputs, targets) in enumerate(batches):
        callback.begin(index)
        if optimizer is not None:
            optimizer.zero_grad(set_to_none=True)
        else:
            module.zero_grad(set_to_none=True)
        with autocast():
            loss = loss_of(module(inputs), targets)
        callback.forward_end(index)
        scaler.scale(loss).backward()
        callback.backward_end(index)
        if optimizer is not None:
            scaler.step(optimizer)
            scaler.update()
        callback.end(index)
        losses.append(float(loss.detach()))
    return losses
