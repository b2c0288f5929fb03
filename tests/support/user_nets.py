"""A user's model file for the tests of `--model path/to/file.py:name` (tests/python/test_models.py,
tests/cli/test_model_check.py copy it into a folder of their own): each form, and each thing that is
not one."""

import torch


class TinyCNN(torch.nn.Module):
    def __init__(self, classes=7):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.head = torch.nn.Linear(4, classes)

    def forward(self, x):
        return self.head(self.conv(x).mean((2, 3)))


class Wide(torch.nn.Module):
    def __init__(self, channels, classes=10):
        super().__init__()


def tiny_cnn():
    return TinyCNN(5)


def with_batches():
    model = torch.nn.Linear(6, 3)
    return model, lambda n: (torch.randn(n, 6), torch.randint(0, 3, (n,)))


def features_only():
    return torch.nn.Linear(6, 3)


def odd_pair():
    return torch.nn.Linear(6, 3), 3


def bad_batch():
    return torch.nn.Linear(6, 3), lambda n: torch.zeros(n, 6)


def sized(depth):
    return torch.nn.Linear(depth, 3)


def broken():
    raise RuntimeError("weights file missing")


instance = torch.nn.Linear(6, 3)
NUMBER = 3
