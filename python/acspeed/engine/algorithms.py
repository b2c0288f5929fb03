"""How each algorithm reduces one bucket: an ordered list of phases, one per role of the algorithm,
each ONE asynchronous collective on one of the bucket's lane groups (phase i runs on
Lane.slots[i]; None when there is nothing to do in that phase, e.g. without a native
reduce-scatter). The issuer (issue.py) decides when each phase is issued; nothing here waits.

For a flat buffer already divided by the world size and zero-padded to a multiple of `divisor`:
  allreduce       all-reduce of the buffer.
  reduce_scatter  reduce-scatter to W shards, then all-gather of the shards back into the buffer.
                  On the CPU the reduce-scatter is an all_to_all and a local sum into this rank's
                  slice of the buffer (collectives.py says why). Without any reduce-scatter for
                  the dtype: one all-reduce, which already leaves the whole sum on every rank.
  hierarchical    nodes of L ranks: intra-node reduce-scatter to L shards, all-reduce of each shard
                  among the ranks holding that shard on the other nodes, intra-node all-gather.
                  Without a reduce-scatter, the intra-node step is an all-reduce and each
                  rank's shard is its slice of the buffer (gathered in place). Nodes of unequal
                  size: reduce to the node's leader, all-reduce among leaders, broadcast from the
                  leader. One rank per node: one all-reduce across nodes.
The result is always the buffer itself. A phase whose group is None (this rank is not in it, e.g.
a non-leader's inter-node step) is skipped by the issuer; it still has its place in the list, so
that every bucket passes through every phase in order (issue.py relies on that).
"""
from typing import Callable, List, Optional, Tuple

import torch

from .. import _runtime
from .collectives import Collectives
from .lanes import Lane

ShardFor = Callable[[int], torch.Tensor]  # numel -> this bucket's reusable shard buffer
Phase = Optional[Callable[[object], object]]  # group -> the backend's Work (asynchronous)


def reduce_scatter(coll: Collectives, flat: torch.Tensor, group,
                   shard_for: ShardFor) -> Optional[Tuple[Phase, torch.Tensor]]:
    """The phase leaving this rank's shard of the sum of `flat` (padded to a multiple of the group's
    size) over `group`, and that shard; None where the backend has no reduce-scatter for the dtype.
    Through all_to_all the shard is this rank's slice of `flat` (then gathered in place) and
    shard_for's buffer receives the pieces; natively, shard_for's buffer is the shard."""
    size = group.size()
    chunk = flat.numel() // size
    if coll.scatters_by_all_to_all(flat.dtype):
        received, mine = shard_for(flat.numel()), flat[group.rank() * chunk:(group.rank() + 1) * chunk]
        return (lambda g: coll.reduce_scatter_by_all_to_all(mine, received, flat, g)), mine
    if coll.supports("reduce_scatter_tensor", flat.dtype):
        shard = shard_for(chunk)
        return (lambda g: coll.reduce_scatter(shard, flat, g)), shard
    return None


class Algorithm:
    name = ""
    roles: Tuple[str, ...] = ()       # the role of each phase's group (lanes.ROLES)

    @property
    def by_node(self) -> bool:
        """Works node by node (intra-node, then among the nodes): the runtime's algorithm table
        (runtime/include/acspeed/comm_methods.h) says so, not the name."""
        return _runtime.core().ALGORITHMS[self.name].by_node

    def divisor(self, coll: Collectives, lane: Lane, dtype: torch.dtype) -> int:
        """The buffer is padded to a multiple of this."""
        return 1

    def phases(self, coll: Collectives, lane: Lane, flat: torch.Tensor, shard_for: ShardFor) -> List[Phase]:
        raise NotImplementedError


class AllReduce(Algorithm):
    name = "allreduce"
    roles = ("all",)

    def phases(self, coll, lane, flat, shard_for):
        return [lambda group: coll.all_reduce(flat, group)]


class ReduceScatter(Algorithm):
    name = "reduce_scatter"
    roles = ("all", "all")

    def divisor(self, coll, lane, dtype):
        return lane.group.size() if coll.scatters(dtype) else 1

    def phases(self, coll, lane, flat, shard_for):
        scatter = reduce_scatter(coll, flat, lane.group, shard_for)
        if scatter is None:
            return [lambda group: coll.all_reduce(flat, group), None]
        first, shard = scatter
        return [first, lambda group: coll.all_gather(flat, shard, group)]


class Hierarchical(Algorithm):
    name = "hierarchical"
    roles = ("intra", "inter", "intra")

    def divisor(self, coll, lane, dtype):
        uniform_with_peers = lane.leader is None and lane.intra is not None
        return lane.intra.size() if uniform_with_peers else 1

    def phases(self, coll, lane, flat, shard_for):
        if lane.leader is not None:  # nodes of unequal size: through the nodes' leaders
            leader = lane.leader
            return [lambda group: coll.reduce(flat, leader, group),
                    lambda group: coll.all_reduce(flat, group),
                    lambda group: coll.broadcast(flat, leader, group)]
        if lane.intra is None:  # one rank per node: the inter-node step is everything
            return [None, lambda group: coll.all_reduce(flat, group), None]
        scatter = reduce_scatter(coll, flat, lane.intra, shard_for)
        if scatter is not None:
            first, shard = scatter
        else:
            local_size, local_rank = lane.intra.size(), lane.intra.rank()
            chunk = flat.numel() // local_size
            shard = flat[local_rank * chunk:(local_rank + 1) * chunk]
            first = lambda group: coll.all_reduce(flat, group)  # noqa: E731
        return [first,
                lambda group: coll.all_reduce(shard, group),
                lambda group: coll.all_gather(flat, shard, group)]


ALGORITHMS = {algorithm.name: algorithm for algorithm in (AllReduce(), ReduceScatter(), Hierarchical())}
