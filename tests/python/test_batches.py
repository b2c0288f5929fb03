"""acspeed._worker.batches: the user's --data function checked before any trial (each bad input a clear error
naming the function and what was expected), and the learnable sequence of synthetic batches the convergence
guard's trajectories train on without --data."""
import sys
import types

import pytest
import torch

from acspeed._worker import batches


@pytest.fixture()
def data_module(monkeypatch):
    """A module `user_data` whose functions the tests name as --data user_data:NAME."""
    module = types.ModuleType("user_data")

    def good(rank, world_size, batch_size):
        generator = torch.Generator().manual_seed(rank)
        for _ in range(100):
            yield torch.randn(batch_size, 8, generator=generator), torch.randint(0, 3, (batch_size,), generator=generator)

    module.good = good
    module.empty = lambda rank, world_size, batch_size: []
    module.short = lambda rank, world_size, batch_size: [(torch.zeros(batch_size, 8), torch.zeros(batch_size).long())] * 3
    module.numbers = lambda rank, world_size, batch_size: [([1, 2], [0, 1])] * 10
    module.rows = lambda rank, world_size, batch_size: [(torch.zeros(4, 8), torch.zeros(3).long())] * 10
    module.not_iterable = lambda rank, world_size, batch_size: 42
    module.two_args = lambda rank, world_size: []

    def raises(rank, world_size, batch_size):
        raise RuntimeError("no such file: /data/train")

    module.raises = raises
    monkeypatch.setitem(sys.modules, "user_data", module)
    return module


def test_the_users_batches_are_the_first_items_of_its_function(data_module):
    got = batches.from_data("user_data:good", 1, 2, 4, 5)
    assert len(got) == 5 and all(inputs.shape == (4, 8) and targets.shape == (4,) for inputs, targets in got)
    assert torch.equal(got[0][0], next(iter(data_module.good(1, 2, 4)))[0])  # called with (rank, world_size, batch_size)


@pytest.mark.parametrize("spec, expected", [
    ("user_data", "must name a function (rank, world_size, batch_size) -> iterable of (inputs, targets)"),
    ("no_such_module_xyz:f", "cannot import no_such_module_xyz"),
    ("user_data:missing", "module user_data has no function missing"),
    ("user_data:empty", "empty(rank=0, world_size=2, batch_size=4) gave no batch(es); at least 5 are needed"),
    ("user_data:short", "gave 3 batch(es); at least 5 are needed, one per step"),
    ("user_data:numbers", "item 0 of numbers(rank=0, world_size=2, batch_size=4) is (a list, a list), "
                          "expected (inputs, targets)"),
    ("user_data:rows", "has 4 inputs but 3 targets"),
    ("user_data:not_iterable", "must name a function (rank, world_size, batch_size) -> iterable of (inputs, targets)"),
    ("user_data:two_args", "must name a function (rank, world_size, batch_size)"),
    ("user_data:raises", "raises(rank=0, world_size=2, batch_size=4) raised RuntimeError: no such file"),
])
def test_bad_data_is_a_clear_error_naming_the_function(data_module, spec, expected):
    with pytest.raises(batches.DataSpecError) as caught:
        batches.from_data(spec, 0, 2, 4, 5)
    assert expected in str(caught.value), str(caught.value)
    assert f"--data '{spec}'" in str(caught.value)


def test_a_batch_the_model_cannot_take_is_an_error_before_any_trial(data_module):
    model = torch.nn.Linear(16, 3)  # takes 16 features; the data has 8
    batch = batches.from_data("user_data:good", 0, 2, 4, 1)[0]
    with pytest.raises(batches.DataSpecError) as caught:
        batches.check_model_fits("user_data:good", model, batch, torch.nn.functional.cross_entropy)
    message = str(caught.value)
    assert "--data 'user_data:good': the model cannot train on its first batch" in message
    assert "inputs a tensor (4, 8) torch.float32" in message and "expected inputs the model takes" in message
    fits = torch.nn.Linear(8, 3)
    before = {k: v.clone() for k, v in fits.state_dict().items()}
    batches.check_model_fits("user_data:good", fits, batch, torch.nn.functional.cross_entropy)
    assert all(torch.equal(before[k], v) for k, v in fits.state_dict().items())  # nothing trained


def test_the_synthetic_stream_is_learnable_fresh_and_seeded_by_rank():
    example = (torch.randn(4, 3, 32, 32), torch.randint(0, 1000, (4,)))
    stream = batches.synthetic(example, 20, rank=0)
    assert len(stream) == 20
    inputs = torch.stack([b[0] for b in stream])
    labels = torch.cat([b[1] for b in stream])
    assert inputs.shape == (20, 4, 3, 32, 32) and labels.dtype == example[1].dtype
    assert not torch.equal(stream[0][0], stream[1][0])  # fresh inputs every step
    assert 2 <= len(labels.unique()) <= 10  # a teacher's classes, not 1000 random ones
    # The labels are a function of the inputs (the same teacher on every rank), the inputs differ by rank.
    again = batches.synthetic(example, 20, rank=0)
    other = batches.synthetic(example, 20, rank=1)
    assert torch.equal(again[5][0], stream[5][0]) and torch.equal(again[5][1], stream[5][1])
    assert not torch.equal(other[0][0], stream[0][0])
    # Learnable: a linear probe on the pooled inputs fits the labels far above chance.
    features = torch.nn.functional.adaptive_avg_pool2d(inputs.reshape(-1, 3, 32, 32), (8, 8)).reshape(80, -1)
    probe = torch.linalg.lstsq(features, torch.nn.functional.one_hot(labels).float()).solution
    accuracy = ((features @ probe).argmax(dim=1) == labels).float().mean().item()
    assert accuracy > 0.9, accuracy


def test_the_synthetic_stream_follows_float_targets_and_integer_inputs():
    regression = batches.synthetic((torch.randn(4, 6), torch.randn(4, 2)), 3, rank=0)
    assert regression[0][1].shape == (4, 2) and regression[0][1].is_floating_point()
    tokens = batches.synthetic((torch.randint(5, 50, (4, 7)), torch.randint(0, 2, (4,))), 3, rank=0)
    assert tokens[0][0].dtype == torch.int64 and int(tokens[0][0].min()) >= 5 and int(tokens[0][0].max()) <= 49
