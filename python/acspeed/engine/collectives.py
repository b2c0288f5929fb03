"""The collectives the comm hook is built from, with what the backend lacks built from what it has.

Which native collectives work is tried once per hook setup on the lane group (every rank tries the
same ones, then agrees on the result with an all-reduce of the flags), so all ranks take the same
path. A try issues the collective asynchronously and waits on it as the hook does: on its Work's
future for the collectives that can end a bucket's reduction (the hook chains the bucket's completion
on that future), on the Work itself for reduce_scatter_tensor. Some backends' Work objects have no
future ("Work::getFuture not implemented"); without one for all_reduce, the hook cannot run
(the hook then steps aside). Missing pieces: without reduce_scatter_tensor the
algorithms all-reduce the whole buffer (see algorithms.py); all_gather_into_tensor becomes the list
all_gather into views of the output."""
import dataclasses
from typing import Dict, Iterable, Optional, Tuple

import torch
import torch.distributed as dist

CHECKED_OPS = ("reduce_scatter_tensor", "all_gather_into_tensor", "all_reduce", "reduce", "broadcast")
_BUILT_FROM_OTHERS = ("reduce_scatter_tensor", "all_gather_into_tensor")


def _try(op: str, dtype: torch.dtype, group, device) -> Optional[str]:
    """None when `op` runs for `dtype` on `group` and can be waited on as the hook does; else what
    went wrong."""
    size, root = group.size(), dist.get_global_rank(group, 0)

    def zeros(numel: int) -> torch.Tensor:
        return torch.zeros(numel, dtype=dtype, device=device)

    issue = {
        "reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(zeros(1), zeros(size), group=group, async_op=True),
        "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(zeros(size), zeros(1), group=group,
                                                                      async_op=True),
        "reduce": lambda: dist.reduce(zeros(1), dst=root, group=group, async_op=True),
        "broadcast": lambda: dist.broadcast(zeros(1), src=root, group=group, async_op=True),
        "all_reduce": lambda: dist.all_reduce(zeros(1), group=group, async_op=True),
    }[op]
    try:
        work = issue()
    except (RuntimeError, NotImplementedError, TypeError, ValueError, AttributeError) as error:
        return f"{type(error).__name__}: {error}".strip()
    if op == "reduce_scatter_tensor":  # never a bucket's last phase: the issuer waits on the Work itself
        work.wait()                    # (gloo's reduce-scatter Work has no future in torch 2.15)
        return None
    try:  # may be a bucket's last phase: the hook chains the bucket's completion on its future
        future = work.get_future()
    except (RuntimeError, NotImplementedError) as error:
        work.wait()
        return f"its Work has no future ({error})".strip()
    future.wait()
    return None


@dataclasses.dataclass
class Collectives:
    """native[(op, dtype)]: the backend runs that collective for that dtype, with a future;
    problems[(op, dtype)]: why not, on this rank (absent where another rank failed it)."""
    native: Dict[Tuple[str, torch.dtype], bool]
    problems: Dict[Tuple[str, torch.dtype], str] = dataclasses.field(default_factory=dict)

    @classmethod
    def detect(cls, group, dtypes: Iterable[torch.dtype], device, ops: Iterable[str] = CHECKED_OPS) -> "Collectives":
        """Collective over `group`: every rank tries the same `ops` (of CHECKED_OPS) for each dtype."""
        keys = [(op, dtype) for dtype in sorted(set(dtypes), key=str) for op in ops]
        problems = {key: problem for key in keys for problem in [_try(*key, group, device)] if problem is not None}
        flags = torch.tensor([0 if key in problems else 1 for key in keys], dtype=torch.int64, device=device)
        dist.all_reduce(flags, op=dist.ReduceOp.MIN, group=group)
        return cls(native={key: bool(flag) for key, flag in zip(keys, flags.tolist())}, problems=problems)

    def supports(self, op: str, dtype: torch.dtype) -> bool:
        return self.native.get((op, dtype), False)

    def emulated(self) -> list:
        """'reduce_scatter_tensor(float32)', ... for the collectives built from others."""
        return [f"{op}({str(dtype).replace('torch.', '')})" for (op, dtype), ok in self.native.items()
                if not ok and op in _BUILT_FROM_OTHERS]

    def missing(self, ops: Iterable[str], dtypes: Iterable[torch.dtype]) -> Optional[str]:
        """None when every one of `ops` works for every one of `dtypes`; else the first that does
        not, and why (this rank's error, or that another rank failed it)."""
        for dtype in sorted(set(dtypes), key=str):
            for op in ops:
                if not self.native.get((op, dtype), False):
                    why = self.problems.get((op, dtype), "it failed on another rank")
                    return f"{op}({str(dtype).replace('torch.', '')}): {why}"
        return None

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
