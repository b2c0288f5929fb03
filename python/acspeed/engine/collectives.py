"""The collectives the comm hook is built from, with what the backend lacks built from what it has.

Which native collectives work is tried once per hook setup on the lane group (every rank tries the
same ones, then agrees on the result with an all-reduce of the flags), so all ranks take the same
path. A try issues the collective asynchronously and waits on it as the hook does: on its Work's
future for the collectives that can end a bucket's reduction (the hook chains the bucket's
completion on that future), on the Work itself for reduce_scatter_tensor and all_to_all_single. Some
backends' Work objects have no future ("Work::getFuture not implemented"); without one for
all_reduce, the hook cannot run (the hook then steps aside). Missing pieces: without a
reduce-scatter (reduce_scatter_tensor, or on the CPU all_to_all_single) the algorithms all-reduce
the whole buffer (see algorithms.py); all_gather_into_tensor becomes the list all_gather into views
of the output.

CPU tensors (gloo) reduce-scatter through all_to_all_single and a local sum, native reduce-scatter
or not: gloo's reduce_scatter_tensor takes 1.5-3x the CPU of an all-reduce of the same bucket, and
sums 16-bit floats one element at a time, converting each (gloo::float16). Two ranks on one core
each, loopback, a 10 MiB fp32 bucket, process CPU time (bench/runtime/gloo_scatter_cost.py;
RESULTS.md): gloo's reduce-scatter + all-gather 27 ms in fp32 and 20 ms in fp16, all_to_all + sum +
all-gather 13 and 6 ms, gloo's all-reduce 10 ms in either. The sum is torch's, pieces added in
group-rank order, each as one elementwise add in the pieces' dtype (16-bit floats are added in fp32
and rounded, as gloo does): at two ranks the same bits as gloo's reduce-scatter or all-reduce. It
runs when the issuer waits on the phase's Work, on the thread that issues the next phase."""
import dataclasses
from typing import Dict, Iterable, Optional, Tuple

import torch
import torch.distributed as dist

CHECKED_OPS = ("reduce_scatter_tensor", "all_gather_into_tensor", "all_to_all_single", "all_reduce", "reduce",
               "broadcast")
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
        "all_to_all_single": lambda: dist.all_to_all_single(zeros(size), zeros(size), group=group, async_op=True),
        "reduce": lambda: dist.reduce(zeros(1), dst=root, group=group, async_op=True),
        "broadcast": lambda: dist.broadcast(zeros(1), src=root, group=group, async_op=True),
        "all_reduce": lambda: dist.all_reduce(zeros(1), group=group, async_op=True),
    }[op]
    try:
        work = issue()
    except (RuntimeError, NotImplementedError, TypeError, ValueError, AttributeError) as error:
        return f"{type(error).__name__}: {error}".strip()
    if op in ("reduce_scatter_tensor", "all_to_all_single"):  # never a bucket's last phase: the issuer
        work.wait()  # waits on the Work itself (gloo's reduce-scatter Work has no future in torch 2.15)
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
    cpu: bool = False  # the tensors are on the CPU: reduce-scatter through all_to_all (the module's docstring)

    @classmethod
    def detect(cls, group, dtypes: Iterable[torch.dtype], device, ops: Iterable[str] = CHECKED_OPS) -> "Collectives":
        """Collective over `group`: every rank tries the same `ops` (of CHECKED_OPS) for each dtype."""
        keys = [(op, dtype) for dtype in sorted(set(dtypes), key=str) for op in ops]
        problems = {key: problem for key in keys for problem in [_try(*key, group, device)] if problem is not None}
        flags = torch.tensor([0 if key in problems else 1 for key in keys], dtype=torch.int64, device=device)
        dist.all_reduce(flags, op=dist.ReduceOp.MIN, group=group)
        return cls(native={key: bool(flag) for key, flag in zip(keys, flags.tolist())}, problems=problems,
                   cpu=torch.device(device).type == "cpu")

    def supports(self, op: str, dtype: torch.dtype) -> bool:
        return self.native.get((op, dtype), False)

    def scatters_by_all_to_all(self, dtype: torch.dtype) -> bool:
        return self.cpu and self.supports("all_to_all_single", dtype)

    def scatters(self, dtype: torch.dtype) -> bool:
        """A reduce-scatter of `dtype` can be issued (reduce_scatter or reduce_scatter_by_all_to_all)."""
        return self.scatters_by_all_to_all(dtype) or self.supports("reduce_scatter_tensor", dtype)

    def emulated(self) -> list:
        """'reduce_scatter_tensor(float32)', ... for the missing collectives built from others."""
        return [f"{op}({str(dtype).replace('torch.', '')})" for op, dtype in self._missing_built()]

    def built_from(self) -> list:
        """The collectives the missing ones are built from (all_to_all_single, all_reduce, all_gather)."""
        names = []
        for op, dtype in self._missing_built():
            name = "all_gather" if op == "all_gather_into_tensor" else \
                "all_to_all_single" if self.scatters_by_all_to_all(dtype) else "all_reduce"
            if name not in names:
                names.append(name)
        return names

    def _missing_built(self) -> list:
        return [(op, dtype) for (op, dtype), ok in self.native.items() if not ok and op in _BUILT_FROM_OTHERS]

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

    def reduce_scatter_by_all_to_all(self, shard: torch.Tensor, received: torch.Tensor, padded: torch.Tensor, group):
        """shard = this rank's part of the sum of `padded` over the group: `received` (padded's size)
        gets every rank's piece for this rank, summed into `shard` when the returned Work is waited on
        (is_completed and wait only: never a bucket's last phase). `shard` may be this rank's own
        slice of `padded`: its piece is sent before the sum overwrites it."""
        return _SumOnWait(dist.all_to_all_single(received, padded, group=group, async_op=True),
                          received.view(group.size(), -1), shard)

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


class _SumOnWait:
    """An all_to_all's Work whose wait() also sums the received pieces (rows of `pieces`) into `shard`,
    once: the pieces in group-rank order, one elementwise add each."""

    def __init__(self, work, pieces: torch.Tensor, shard: torch.Tensor):
        self._work, self._pieces, self._shard, self._summed = work, pieces, shard, False

    def is_completed(self) -> bool:
        return self._work.is_completed()

    def wait(self) -> bool:
        self._work.wait()
        if not self._summed:
            pieces = self._pieces
            if len(pieces) == 1:
                self._shard.copy_(pieces[0])
            else:
                torch.add(pieces[0], pieces[1], out=self._shard)
                for piece in pieces[2:]:
                    self._shard.add_(piece)
            self._summed = True
        return True
