"""The convergence task of bench/compression (`--model teacher:task`, with bench/compression on
PYTHONPATH; `teacher:corrupted_task` with tests/tuner too): a learnable synthetic classification. Inputs are standard normal vectors; labels come
from a fixed, seeded random teacher network (two layers, 10 classes), so there is a function to
learn and every run sees the same data. The student is a three-layer MLP (64 -> 512 -> 512 -> 10)
whose weight matrices are large enough for a low rank to lose information."""
import os

import torch

INPUTS, CLASSES = 64, 10


def _teacher() -> torch.nn.Module:
    generator = torch.Generator().manual_seed(20261203)
    first = torch.nn.Linear(INPUTS, 32)
    second = torch.nn.Linear(32, CLASSES)
    with torch.no_grad():
        for layer in (first, second):
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator) / layer.weight.shape[1] ** 0.5)
            layer.bias.zero_()
    return torch.nn.Sequential(first, torch.nn.Tanh(), second)


def make_batch(batch_size: int):
    """This rank's samples (seeded by RANK) and the teacher's labels for them."""
    generator = torch.Generator().manual_seed(11 + int(os.environ.get("RANK", "0")))
    inputs = torch.randn(batch_size, INPUTS, generator=generator)
    with torch.no_grad():
        labels = _teacher()(inputs).argmax(dim=1)
    return inputs, labels


def task():
    torch.manual_seed(0)
    student = torch.nn.Sequential(torch.nn.Linear(INPUTS, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                  torch.nn.ReLU(), torch.nn.Linear(512, CLASSES))
    return student, make_batch


def corrupted_task():
    """task() under the tests' deliberately harmful compressor (tests/tuner/tiny_models.py): each
    compressed bucket's averaged gradient replaced by seeded noise of its norm. The convergence guard
    must reject it on this task."""
    from tiny_models import corrupt_compressed_buckets  # noqa: PLC0415 - tests/tuner on PYTHONPATH

    corrupt_compressed_buckets()
    return task()
