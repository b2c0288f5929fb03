"""The fp16 compression's two casts of a bucket, each one C++ pass on the CPU (_core.pack_fp16,
_core.unpack_fp16_if_finite), against what torch's fp16_compress_hook computes, bit for bit: the pack
(acspeed.engine.cast.pack) is `buffer.to(torch.float16).div_(world_size)`; the unpack with its
non-finite check (acspeed.engine.fallback.unpack_if_finite) is the hook's unpacking copy, and leaves
the bucket untouched when the reduced copy holds NaN/Inf (the fallback re-sends the bucket's own
gradients). No processes; a few seconds."""
import pytest
import torch

from acspeed.engine.cast import pack
from acspeed.engine.fallback import unpack_if_finite


def _every_half() -> torch.Tensor:
    return torch.arange(-2 ** 15, 2 ** 15, dtype=torch.int32).to(torch.int16).view(torch.float16)


def _hard_floats() -> torch.Tensor:
    """Every fp16 value, the midpoints between neighbours (ties) and the fp32 values next to them, the
    range's edges, and random values from 1e-10 to 1e6 in magnitude."""
    halves = _every_half()
    finite = halves[torch.isfinite(halves)].float().sort().values
    middles = (finite[:-1] + finite[1:]) / 2
    edges = torch.tensor([65504.0, 65519.996, 65520.0, 7e4, 2.0 ** -24, 2.0 ** -25, 2.0 ** -26, 2.0 ** -14, 0.0, -0.0,
                          float("inf"), float("-inf")])
    generator = torch.Generator().manual_seed(39)
    spread = torch.randn(500_000, generator=generator) * torch.logspace(-10, 6, 500_000)
    return torch.cat([finite, middles, middles.nextafter(finite[:-1]), middles.nextafter(finite[1:]), edges, -edges,
                      spread])


@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 7, 8, 12])
def test_pack_is_torchs_cast_then_division_bit_for_bit(world_size):
    flat = _hard_floats()
    packed = torch.full(flat.shape, 5.0, dtype=torch.float16)
    pack(packed, flat, world_size)
    expected = flat.to(torch.float16).div_(world_size)
    assert torch.equal(packed.view(torch.int16), expected.view(torch.int16))
    wide = flat.double()  # an fp64 bucket: torch's ops, the same result
    pack(packed, wide, world_size)
    assert torch.equal(packed.view(torch.int16), wide.to(torch.float16).div_(world_size).view(torch.int16))


def test_every_finite_fp16_value_unpacks_as_torchs_copy_does_bit_for_bit():
    halves = _every_half()
    finite = halves[torch.isfinite(halves)]
    assert finite.numel() == 2 * 31 * 1024
    for count in (finite.numel(), 1, 7, 17, 1001):  # the vector widths' tails
        reduced = finite[-count:].contiguous()
        bucket = torch.full((count,), 3.0)
        assert unpack_if_finite(reduced, bucket)
        assert torch.equal(bucket.view(torch.int32), torch.empty(count).copy_(reduced).view(torch.int32))


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
@pytest.mark.parametrize("where", [0, 4097, -1])
def test_a_nan_or_inf_anywhere_leaves_the_bucket_untouched(bad, where):
    gradients = torch.randn(10_000)
    reduced = (gradients / 2).to(torch.float16)
    reduced[where] = bad
    bucket = gradients.clone()
    assert not unpack_if_finite(reduced, bucket)
    assert torch.equal(bucket, gradients)


def test_other_dtypes_and_layouts_take_torchs_ops_with_the_same_verdict():
    reduced = torch.tensor([1.5, -2.0, 65504.0], dtype=torch.float16)
    wide = torch.zeros(3, dtype=torch.float64)  # an fp64 bucket under fp16
    assert unpack_if_finite(reduced, wide) and wide.tolist() == [1.5, -2.0, 65504.0]
    strided = torch.zeros(6)[::2]  # not contiguous: no raw pointer walk over it
    assert unpack_if_finite(reduced, strided) and strided.tolist() == [1.5, -2.0, 65504.0]
    reduced[1] = float("inf")
    assert not unpack_if_finite(reduced, wide) and wide.tolist() == [1.5, -2.0, 65504.0]
    with pytest.raises(RuntimeError):  # a size mismatch is torch's error, never a walk past the end
        unpack_if_finite(torch.zeros(4, dtype=torch.float16), torch.zeros(3))
