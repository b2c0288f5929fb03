"""The model a worker trains, from `--model`:

    NAME                   a torchvision classification model (1000 classes)
    pkg.module:name        imported from the folder acspeed-tune was started in, then PYTHONPATH
    path/to/file.py:name   a file (a relative path: from the folder acspeed-tune was started in)

where `name` is a torch.nn.Module class built without arguments, a function returning a module, or a
function returning (model, make_batch), make_batch(batch_size) returning (inputs, targets). Without
make_batch (torchvision models, a class, a function returning only a module), the batch is
(batch, 3, S, S) standard normal floats, S = --image-size, with integer targets over the output's
last dimension (an image classifier's classes). `build_model` does not run the model; the first
default batch runs it once to count the classes, and a model that rejects that batch is a usage error
saying so (check.py runs the whole check)."""
import inspect

import torch
import torch.distributed as dist

from acspeed._worker import user_code

_TORCHVISION_CLASSES = 1000
_SEED = 1234


class ModelSpecError(ValueError):
    """--model names nothing that can be built, or a model its batch does not fit: a usage error for
    the tuner (exit 2)."""


def _rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def _classes(spec: str, model: torch.nn.Module, images: torch.Tensor) -> int:
    """The last dimension of the model's output for `images` (in eval mode, without gradients)."""
    shape = f"({', '.join(map(str, images.shape))})"
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            output = model(images[:1])
    except Exception as error:  # noqa: BLE001 - the user's model: named in the message
        raise ModelSpecError(f"--model '{spec}': the model rejects the default batch of shape {shape} (random "
                             f"images): {type(error).__name__}: {error}; give make_batch or --data") from error
    finally:
        model.train(was_training)
    if isinstance(output, (tuple, list)) and output:
        output = output[0]
    if not (isinstance(output, torch.Tensor) and output.dim() == 2 and output.shape[1] >= 1):
        raise ModelSpecError(f"--model '{spec}': for the default batch of shape {shape} (random images) the model "
                             f"returns {user_code.describe(output)}, not (batch, classes) scores; give make_batch "
                             f"or --data")
    return int(output.shape[1])


def image_batches(spec: str, model: torch.nn.Module, image_size: int, classes=None):
    """make_batch(batch_size) -> (images, labels): (batch, 3, S, S) standard normal floats and integer
    labels below `classes` (None: the last dimension of the model's output, counted at the first call)."""
    counted = [classes]

    def make_batch(batch_size):
        generator = torch.Generator().manual_seed(_SEED + _rank())
        images = torch.randn(batch_size, 3, image_size, image_size, generator=generator)
        if counted[0] is None:
            counted[0] = _classes(spec, model, images)
        labels = torch.randint(0, counted[0], (batch_size,), generator=generator)
        return images, labels

    return make_batch


def _built_without_arguments(spec: str, name: str, found):
    """found() for a class or function taking no required argument; else what it takes."""
    kind = "class" if inspect.isclass(found) else "function"
    try:
        signature = inspect.signature(found)
    except (TypeError, ValueError):  # a builtin without one: called as it is
        signature = None
    if signature is not None:
        required = [p for p in signature.parameters.values() if p.default is inspect.Parameter.empty
                    and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
        if required:
            raise ModelSpecError(f"--model '{spec}': {name} is a {kind} taking {signature}; acspeed calls it "
                                 f"without arguments: give them defaults, or name a function that builds the model")
    try:
        return found()
    except Exception as error:  # noqa: BLE001 - the user's code: named in the message
        raise ModelSpecError(f"--model '{spec}': {name}() raised {type(error).__name__}: {error}") from error


def _user_model(spec: str, image_size: int, start_dir):
    name = spec.rpartition(":")[2]
    found = user_code.resolve("--model", spec, start_dir, ModelSpecError, "class or function")
    if isinstance(found, torch.nn.Module):
        raise ModelSpecError(f"--model '{spec}': {name} is {user_code.describe(found)} object; name its class or "
                             f"a function that builds it")
    if inspect.isclass(found) and not issubclass(found, torch.nn.Module):
        raise ModelSpecError(f"--model '{spec}': {name} is a class that is not a torch.nn.Module")
    if not callable(found):
        raise ModelSpecError(f"--model '{spec}': {name} is {user_code.describe(found)}, not a torch.nn.Module "
                             f"class or a function")
    built = _built_without_arguments(spec, name, found)
    if isinstance(built, torch.nn.Module):
        return built, image_batches(spec, built, image_size)
    if (isinstance(built, tuple) and len(built) == 2 and isinstance(built[0], torch.nn.Module)
            and callable(built[1])):
        return built
    raise ModelSpecError(f"--model '{spec}': {name}() returned {user_code.describe(built)}, not a torch.nn.Module "
                         f"nor (model, make_batch)")


def build_model(spec: str, image_size: int, start_dir=None):
    """(model, make_batch) for `--model` (the module's docstring); `start_dir`: the folder
    acspeed-tune was started in (default: the current one)."""
    if ":" in spec:
        return _user_model(spec, image_size, start_dir)
    import torchvision  # noqa: PLC0415 - only torchvision models need it
    names = torchvision.models.list_models(module=torchvision.models)
    if spec not in names:
        raise ModelSpecError(f"--model '{spec}' is not a torchvision classification model nor pkg.module:name or "
                             f"path/to/file.py:name (accepted e.g.: "
                             f"{', '.join(n for n in names if n.startswith('resnet'))}, ...)")
    model = torchvision.models.get_model(spec, weights=None, num_classes=_TORCHVISION_CLASSES)
    return model, image_batches(spec, model, image_size, _TORCHVISION_CLASSES)
