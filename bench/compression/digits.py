"""A real labelled dataset shipped inside a PyPI package, for bench_time_to_accuracy.py: scikit-learn's
digits (1797 grey 8x8 images of handwritten digits, 10 classes; the data file is inside the
scikit-learn wheel: nothing is downloaded at run time; `pip install scikit-learn`). Images are
upsampled to 32x32 and repeated over 3 channels for torchvision's resnet18, whose 46.8 MB of fp32
gradients (1000 outputs; 10 used) make a 1 Gbit link the bottleneck of a 2-node DDP step.

    --model digits:model   (model, make_batch) for acspeed-tune and the seed benchmark
    --model digits:model10 the same resnet18 with a 10-class head, as a user would build it for digits
                           (44.7 MB of gradients: the 1 Gbit link stays the bottleneck); with 1000
                           outputs the first steps learn mostly which 10 classes occur
    --data digits:batches  (rank, world_size, batch_size) -> endless (inputs, targets) of this rank's
                           shard of the training split, reshuffled (seeded) every epoch
"""
import itertools

import torch

TEST_SAMPLES = 297  # of 1797: the held-out test split (seeded), 1500 for training
SPLIT_SEED = 26
SIZE = 32


def _tensors():
    from sklearn.datasets import load_digits  # noqa: PLC0415 - only the benchmark needs scikit-learn
    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0  # N x 1 x 8 x 8, in [0, 1]
    images = torch.nn.functional.interpolate(images, size=(SIZE, SIZE), mode="bilinear", align_corners=False)
    images = ((images - 0.5) / 0.5).repeat(1, 3, 1, 1)
    labels = torch.tensor(digits.target, dtype=torch.int64)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(SPLIT_SEED))
    test, train = order[:TEST_SAMPLES], order[TEST_SAMPLES:]
    return (images[train], labels[train]), (images[test], labels[test])


def split():
    """((train images, labels), (test images, labels))."""
    return _tensors()


def epoch_batches(rank: int, world_size: int, batch_size: int, epoch: int, seed: int = 0):
    """This rank's batches of one epoch (a distributed sampler's shard: every rank the same count)."""
    (images, labels), _ = _tensors()
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed * 1000 + epoch))
    per_rank = len(order) // world_size
    shard = order[rank * per_rank:(rank + 1) * per_rank]
    for start in range(0, per_rank - batch_size + 1, batch_size):
        index = shard[start:start + batch_size]
        yield images[index], labels[index]


def batches(rank: int, world_size: int, batch_size: int):
    """The --data function: endless epochs of this rank's shard."""
    return itertools.chain.from_iterable(epoch_batches(rank, world_size, batch_size, e) for e in itertools.count())


def model(seed: int = 0, classes: int = 1000):
    """(resnet18 for 32x32 digits with `classes` outputs, make_batch) as `--model digits:model`
    expects; `seed` sets the initial weights."""
    import torchvision  # noqa: PLC0415
    torch.manual_seed(seed)
    net = torchvision.models.resnet18(num_classes=classes)

    def make_batch(batch_size):
        return next(iter(epoch_batches(0, 1, batch_size, 0)))

    return net, make_batch


def model10(seed: int = 0):
    """`--model digits:model10`: model() with a 10-class head."""
    return model(seed, classes=10)
