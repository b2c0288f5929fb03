"""The compressor interface: how one compression reduces a bucket inside the hook (state.py).

A compressor turns a bucket into a Job (issue.py): its phases, one collective per lane slot, and
the finish that puts the result into the bucket. The hook state holds the config's compressor and
the plain one (cast.py's Cast: the bucket in its own dtype, or cast to fp16/bf16), which reduces
every bucket the config's compressor passes over and the guard's uncompressed re-sends.

COMPRESSORS maps a compression's wire form in the runtime's table
(runtime/include/acspeed/comm_methods.h, `CommConfig.compression_info.form`) to its class: a new
compression is a row there, its module here and one row in COMPRESSORS.
"""
from typing import TYPE_CHECKING, Optional, Protocol, Sequence, Tuple

import torch

from .cast import Cast
from .powersgd import LowRank

if TYPE_CHECKING:
    from .._core import CommConfig
    from .lanes import Topology


class Compressor(Protocol):
    """What the hook state asks of a compression (cast.Cast and powersgd.LowRank implement it).
    Every rank builds the same one from the same config, so every rank issues the same
    collectives."""

    # A dtype the backend must all-reduce besides the gradients' own (checked once by the hook
    # state; a compressor whose dtype the backend lacks gives way to the plain path), or None.
    wire_dtype: Optional[torch.dtype]
    # What it keeps across steps (PowerSGD's factors and residuals, acspeed.state_dict), or None.
    state: object

    @classmethod
    def create(cls, config: "CommConfig", algorithm, topology: Optional["Topology"],
               params: Sequence[torch.nn.Parameter]) -> "Compressor":
        """Built once per hook state, after the topology, before the lanes."""

    def roles(self, algorithm) -> Tuple[str, ...]:
        """The lane slots a bucket's phases use with `algorithm` (lanes.py builds their groups)."""

    def place(self, algorithm, phases: list) -> list:
        """The plain path's phases (the algorithm's) in this compressor's lane slots."""

    def begin_step(self) -> bool:
        """At bucket 0: whether this step's buckets are compressed (and so may be guarded)."""

    def job(self, hook, index: int, bucket, flat: torch.Tensor, lane, result):
        """The compressed reduction of a bucket of a compressing step (in the issuer's context), or
        None: the bucket takes the plain path."""

    def end_step(self, compressed: bool) -> None:
        """The step's last hook call; `compressed`: what begin_step said for it."""


COMPRESSORS = {"as_is": Cast, "cast": Cast, "low_rank": LowRank}


def compressor_for(config: "CommConfig", algorithm, topology: Optional["Topology"],
                   params: Sequence[torch.nn.Parameter]) -> Compressor:
    """The config's compressor (ValueError for a wire form no row names)."""
    form = config.compression_info.form
    if form not in COMPRESSORS:
        raise ValueError(f"compression {config.compression} has wire form {form}, which acspeed's hook has no "
                         f"compressor for (accepted: {', '.join(COMPRESSORS)})")
    return COMPRESSORS[form].create(config, algorithm, topology, params)
