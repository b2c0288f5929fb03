"""The convergence guard's worker half (the tuner's half: tuner/include/acspeed/tuner/convergence_guard.h):
what a trial measures for the guard to judge a compressed config's numerics.

The gradient-fidelity window (`fidelity_steps` > 0 in a trial request): after the timed steps, with
the weights held still, the exact average of the local gradients is all-reduced once on the control
group (the gradients taken under no_sync), then `fidelity_steps` synchronised steps (no optimizer
step) give the compressed path's average of the same gradients; the window's sums (error feedback
makes the compressed sum track the exact one) give the cosine similarity and the relative error of
the norm.

The loss trajectory (`trajectory_steps` T > 0): the model gets its initial weights back and is
wrapped again with the trial's config, compressing from the first step (PowerSGD's start step set
to 0), and trains T steps on T distinct batches per rank (batches.py: `--data`, or a learnable
synthetic batches), the same sequence for every trajectory; the loss of each step (mean over ranks)
is reported."""
import json
import math
from typing import List, Optional

import torch
import torch.distributed as dist

from .. import _runtime
from .steps import StepCallback, train_steps, training


def _gradients(params) -> torch.Tensor:
    return torch.cat([p.grad.detach().flatten().double() for p in params if p.grad is not None]).cpu()


class _Collect(StepCallback):
    """Each step's averaged gradients (still scaled, as the exact ones)."""

    def __init__(self, params):
        self.params = params
        self.gradients: List[torch.Tensor] = []

    def end(self, index: int) -> None:
        self.gradients.append(_gradients(self.params))


def fidelity(trainer, scaler, control_group, steps: int) -> dict:
    """The gradient-fidelity window on the trainer's DDP model: `steps` synchronised steps on held
    weights (so every step's local gradients are the same) against the exact average of those
    gradients."""
    batch = [(trainer.inputs, trainer.targets)]
    with trainer.ddp.no_sync():
        train_steps(trainer.ddp, batch, trainer.autocast, scaler)
    exact = _gradients(trainer.params())
    dist.all_reduce(exact, group=control_group)
    exact /= dist.get_world_size()
    collect = _Collect(trainer.params())
    train_steps(trainer.ddp, batch * steps, trainer.autocast, scaler, callback=collect)
    cosines = [float(torch.nn.functional.cosine_similarity(g, exact, dim=0)) for g in collect.gradients]
    compressed_sum = collect.gradients[0]
    for gradients in collect.gradients[1:]:
        compressed_sum = compressed_sum + gradients
    exact_sum_norm = float(exact.norm()) * steps
    return {"fidelity_cosine": float(torch.nn.functional.cosine_similarity(compressed_sum, exact, dim=0)),
            "fidelity_norm_error": abs(float(compressed_sum.norm()) - exact_sum_norm) / max(exact_sum_norm, 1e-300),
            "fidelity_step_cosine_min": min(cosines), "fidelity_steps": steps}


def trajectory(trainer, config, control_group, steps: int) -> Optional[List[float]]:
    """The loss trajectory (mean over ranks per step) of `steps` steps on the trainer's batches
    from the initial weights with `config` (a CommConfig), compressing from the first step; None
    when a loss became NaN/Inf."""
    if config.compression_info.ranked and config.powersgd_start_step != 0:
        fields = json.loads(config.to_json())
        fields["powersgd_start_step"] = 0
        config, _ = _runtime.core().CommConfig.from_json(json.dumps(fields))
    trainer.rewrap(config, "ddp")
    optimizer, scaler = training(trainer.ddp.parameters(), trainer.precision, trainer.device)
    batches = ((inputs.to(trainer.device), targets.to(trainer.device)) for inputs, targets in trainer.batches[:steps])
    losses = train_steps(trainer.ddp, batches, trainer.autocast, scaler, optimizer)
    curve = torch.tensor(losses, dtype=torch.float64)
    finite = torch.tensor([1.0 if all(math.isfinite(x) for x in losses) else 0.0], dtype=torch.float64)
    dist.all_reduce(curve, op=dist.ReduceOp.SUM, group=control_group)
    dist.all_reduce(finite, op=dist.ReduceOp.MIN, group=control_group)
    return (curve / dist.get_world_size()).tolist() if finite.item() > 0 else None
