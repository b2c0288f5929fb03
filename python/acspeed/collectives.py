"""The collectives the comm hook is built from, with what the backend lacks built from what it has.

Which native collectives work is probed once per hook setup on the lane group (every rank runs the
same probes, then agrees on the result with an all-reduce of the flags), so all ranks take the same
path. Missing pieces: without reduce_scatter_tensor the algorithms all-reduce the whole buffer (see
algorithms.py); all_gather_into_tensor becomes the list all_gather into views of the output."""
import dataclasses
from typing import Dict, Iterable, Tuple

import torch
import torch.distributed as dist

_PROBES = ("reduce_scatter_tensor", "all_gather_into_tensor", "all_reduce")


def _try(op: str, dtype: torch.dtype, group, device) -> bool:
    size = group.size()
    try:
        if op == "reduce_scatter_tensor":
            dist.reduce_scatter_tensor(torch.zeros(1, dtype=dtype, device=device),
                                       torch.zeros(size, dtype=dtype, device=device), group=group)
        elif op == "all_gather_into_tensor":
            dist.all_gather_into_tensor(torch.zeros(size, dtype=dtype, device=device),
                                        torch.zeros(1, dtype=dtype, device=device), group=group)
        else:
            dist.all_reduce(torch.zeros(1, dtype=dtype, device=device), group=group)
        return True
    except (RuntimeError, NotImplementedError, TypeError, ValueError, AttributeError):
        return False


@dataclasses.dataclass
class Collectives:
    """native[(op, dtype)]: the backend runs that collective for that dtype."""
    native: Dict[Tuple[str, torch.dtype], bool]

    @classmethod
    def probe(cls, group, dtypes: Iterable[torch.dtype], device) -> "Collectives":
        """Collective over `group`."""
        keys = [(op, dtype) for dtype in sorted(set(dtypes), key=str) for op in _PROBES]
        flags = torch.tensor([1 if _try(op, dtype, group, device) else 0 for op, dtype in keys],
                             dtype=torch.int64, device=device)
        dist.all_reduce(flags, op=dist.ReduceOp.MIN, group=group)
        return cls(native={key: bool(flag) for key, flag in zip(keys, flags.tolist())})

    def supports(self, op: str, dtype: torch.dtype) -> bool:
        return self.native.get((op, dtype), False)

    def emulated(self) -> list:
        """'reduce_scatter_tensor(float32)', ... for the collectives built from others."""
        return [f"{op}({str(dtype).replace('torch.', '')})" for (op, dtype), ok in self.native.items()
                if not ok and op != "all_reduce"]

    # Every collective below is asynchronous: it returns the backend's Work and never waits.

    def all_reduce(self, tensor: torch.Tensor, group):
        return dist.all_reduce(tensor, group=group, async_op=True)

    def reduce_scatter(self, shard: torch.Tensor, padded: torch.Tensor, group):
        """shard = this rank's part of the sum of `padded` over the group (native only: without it,
        algorithms.py all-reduces the whole buffer instead)."""
        return dist.reduce_scatter_tensor(shard, padded, group=group, async_op=True)

    def all_gather(self, padded: torch.Tensor, shard: torch.Tensor, group):
        """Fills `padded` with every rank's shard, in group-rank order; `shard` may be this rank's
        own slice of `padded` (in place)."""
        if self.supports("all_gather_into_tensor", padded.dtype):
            return dist.all_gather_into_tensor(padded, shard, group=group, async_op=True)
        return dist.all_gather(list(padded.chunk(group.size())), shard, group=group, async_op=True)

    def reduce(self, tensor: torch.Tensor, dst: int, group):
        return dist.reduce(tensor, dst=dst, group=group, async_op=True)

    def broadcast(self, tensor: torch.Tensor, src: int, group):
        return dist.broadcast(tensor, src=src, group=group, async_op=True)
