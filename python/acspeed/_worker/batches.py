"""The batches the tuner's workers train on (acspeed._worker.worker): the user's data, or a learnable
sequence of synthetic batches, all made when the workers start, before any trial is timed.

`acspeed-tune --data pkg.module:function` (or path/to/file.py:function, user_code.py) names a function

    function(rank: int, world_size: int, batch_size: int) -> iterable of (inputs, targets)

called once on every rank; each item is a tuple (inputs, targets) of torch tensors with batch_size
rows (this rank's share of a step: the ranks' items should differ, as a distributed sampler's do),
inputs the model takes, targets either integer class indices (cross-entropy) or floats of the
model output's shape (mean squared error). The workers take the first T items (T = the trajectory
steps, --trajectory-steps): the first is the trials' batch (timed steps and the gradient-fidelity
window), the T items in order are the trajectories' batches (tuner/include/acspeed/tuner/convergence_guard.h). An
iterable that cannot give T items, an item that is not a pair of tensors, or a first batch the model
cannot train on is an error naming the function and what was expected, before any trial.

Without --data, the trials' batch is the model's own make_batch (random inputs for torchvision
models) and the trajectories train on a learnable sequence of synthetic batches: fresh inputs every
step, drawn like make_batch's (standard normal floats, or integers in the range of its integer
inputs), with labels from a fixed random teacher (a seeded linear map of the inputs, average-pooled
to 8x8 when they are images, to at most 10 classes; float targets: the teacher's outputs). Random labels would
give nothing to learn; the teacher's function is learnable. The same teacher on every rank, inputs
seeded by rank.
"""
import itertools

import torch

from acspeed._worker import user_code

_TEACHER_SEED = 20261204
_INPUT_SEED = 4242
_MAX_CLASSES = 10


class DataSpecError(ValueError):
    """--data names nothing usable: a usage error for the tuner (exit 2), before any trial."""


def _expected(spec: str) -> str:
    return (f"--data '{spec}' must name a function (rank, world_size, batch_size) -> iterable of (inputs, targets) "
            f"torch tensors")


def from_data(spec: str, rank: int, world_size: int, batch_size: int, count: int, start_dir=None) -> list:
    """The first `count` (inputs, targets) of the user's function on this rank; `spec` is found as
    --model's (user_code.py: pkg.module:function or path/to/file.py:function, from `start_dir`)."""
    if not spec.rpartition(":")[0] or not spec.rpartition(":")[2]:
        raise DataSpecError(f"{_expected(spec)}: write it as pkg.module:function")
    function = user_code.resolve("--data", spec, start_dir, DataSpecError, "function")
    function_name = spec.rpartition(":")[2]
    if not callable(function):
        raise DataSpecError(f"--data '{spec}': {function_name} is {user_code.describe(function)}, not a function")
    call = f"{function_name}(rank={rank}, world_size={world_size}, batch_size={batch_size})"
    try:
        iterable = function(rank, world_size, batch_size)
        items = list(itertools.islice(iter(iterable), count))
    except TypeError as error:
        raise DataSpecError(f"{_expected(spec)}; {call} gave {error}") from error
    except Exception as error:  # noqa: BLE001 - the user's code: named in the message
        raise DataSpecError(f"--data '{spec}': {call} raised {type(error).__name__}: {error}") from error
    if len(items) < count:
        raise DataSpecError(f"--data '{spec}': {call} gave {'no' if not items else len(items)} batch(es); at least "
                            f"{count} are needed, one per step of the convergence guard's longest trajectory "
                            f"(--trajectory-steps, doubled: an undecided verdict is extended)")
    for index, item in enumerate(items):
        check_pair(item, f"item {index} of {call}", f"{_expected(spec)}; ", f"--data '{spec}': ", DataSpecError)
    return [tuple(item) for item in items]


def check_pair(item, what: str, shape_prefix: str, rows_prefix: str, error) -> None:
    """`item` (`what`: where it came from) is (inputs, targets) tensors with as many rows each; else
    `error` with the prefix for a wrong shape of the item or for unequal rows."""
    if not (isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(x, torch.Tensor) for x in item)):
        inner = (", ".join(user_code.describe(x, inside=False) for x in item) if isinstance(item, (tuple, list))
                 else user_code.describe(item))
        raise error(f"{shape_prefix}{what} is ({inner}), expected (inputs, targets)")
    if item[0].shape[:1] != item[1].shape[:1]:
        raise error(f"{rows_prefix}{what} has {item[0].shape[0] if item[0].dim() else 0} inputs but "
                    f"{item[1].shape[0] if item[1].dim() else 0} targets; expected as many of each")


def check_model_fits(spec: str, model: torch.nn.Module, batch, loss_fn, option: str = "--data",
                     error=DataSpecError) -> None:
    """The model takes the first batch and the loss takes its targets: else `error` naming `option`,
    before any trial. Evaluated without gradients in eval mode (the weights and buffers stay as they are)."""
    inputs, targets = batch
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            loss_fn(model(inputs), targets)
    except Exception as caught:  # noqa: BLE001 - the user's shapes: named in the message
        raise error(
            f"{option} '{spec}': the model cannot train on its first batch (inputs {user_code.describe(inputs)}, "
            f"targets {user_code.describe(targets)}): {type(caught).__name__}: {caught}; expected inputs the model "
            f"takes and targets that are integer class indices (cross-entropy) or floats of the output's shape "
            f"(mean squared error)"
        ) from caught
    finally:
        model.train(was_training)


def _features(inputs: torch.Tensor) -> torch.Tensor:
    x = inputs.float()
    if x.dim() == 4:  # images: the coarse picture is what the teacher sees
        x = torch.nn.functional.adaptive_avg_pool2d(x, (min(8, x.shape[2]), min(8, x.shape[3])))
    return x.reshape(x.shape[0], -1)


def _fresh_inputs(example: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    if example.is_floating_point():
        return torch.randn(example.shape, generator=generator).to(example.dtype)
    low, high = int(example.min()), int(example.max())
    return torch.randint(low, high + 1, example.shape, generator=generator).to(example.dtype)


def synthetic(example, count: int, rank: int) -> list:
    """`count` batches shaped as `example` (inputs, targets): fresh inputs seeded by rank, labels from
    a fixed random teacher (the module's docstring)."""
    example_inputs, example_targets = example
    teacher = torch.Generator().manual_seed(_TEACHER_SEED)
    width = _features(example_inputs[:1]).shape[1]
    if example_targets.is_floating_point():
        outputs = max(1, example_targets[0].numel())
    else:
        outputs = max(2, min(_MAX_CLASSES, int(example_targets.max()) + 1))
    weights = torch.randn(width, outputs, generator=teacher) / width ** 0.5
    generator = torch.Generator().manual_seed(_INPUT_SEED + rank)
    batches = []
    for _ in range(count):
        inputs = _fresh_inputs(example_inputs, generator)
        logits = _features(inputs) @ weights
        if example_targets.is_floating_point():
            targets = logits.reshape(example_targets.shape).to(example_targets.dtype)
        else:
            targets = logits.argmax(dim=1).to(example_targets.dtype)
        batches.append((inputs, targets))
    return batches
