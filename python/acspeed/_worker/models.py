"""The model a worker trains: `--model NAME`, a torchvision classification model fed random images
(1000 classes), or `--model pkg.module:function`, a function returning (model, make_batch) where
make_batch(batch_size) returns (inputs, targets)."""
import importlib

import torch
import torch.distributed as dist


class ModelSpecError(ValueError):
    """--model names nothing that can be built: a usage error for the tuner (exit 2)."""


def build_model(spec: str, image_size: int):
    """(model, make_batch) for `--model`."""
    if ":" in spec:
        module_name, _, function_name = spec.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise ModelSpecError(f"--model '{spec}': cannot import {module_name} ({error})") from error
        function = getattr(module, function_name, None)
        if function is None:
            raise ModelSpecError(f"--model '{spec}': module {module_name} has no function {function_name}")
        built = function()
        if not (isinstance(built, tuple) and len(built) == 2 and callable(built[1])):
            raise ModelSpecError(f"--model '{spec}': the function must return (model, make_batch)")
        return built
    import torchvision  # noqa: PLC0415 - only torchvision models need it
    names = torchvision.models.list_models(module=torchvision.models)
    if spec not in names:
        raise ModelSpecError(f"--model '{spec}' is not a torchvision classification model nor pkg.module:function "
                         f"(accepted e.g.: {', '.join(n for n in names if n.startswith('resnet'))}, ...)")
    model = torchvision.models.get_model(spec, weights=None, num_classes=1000)

    def make_batch(batch_size):
        generator = torch.Generator().manual_seed(1234 + dist.get_rank())
        images = torch.randn(batch_size, 3, image_size, image_size, generator=generator)
        labels = torch.randint(0, 1000, (batch_size,), generator=generator)
        return images, labels

    return model, make_batch
