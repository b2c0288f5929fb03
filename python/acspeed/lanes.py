"""Communication lanes: the K extra process groups ("streams") a config spreads gradient buckets over.

Bucket i goes to lane i % K. Each lane owns its process groups and ONE worker thread that runs the
lane's buckets one after the other, in the order DDP hands them over (bucket-index order, the same
on every rank). So every rank issues the same collectives on the same group in the same order, which
gloo needs, even for algorithms with several dependent phases (reduce-scatter then all-gather) and
for the compression guard's conditional retry. The autograd thread only enqueues and never waits.
On CUDA the worker runs on the stream that was current when DDP called the hook, so the bucket's
data dependencies hold without a host synchronisation (NCCL: one communicator per lane group).
"""
import dataclasses
import os
import queue
import socket
import threading
import zlib
from typing import Callable, List, Optional

import torch
import torch.distributed as dist

from . import _log


@dataclasses.dataclass
class Topology:
    """Which global ranks of the DDP group share a node, nodes ordered by their first rank."""
    nodes: List[List[int]]

    @classmethod
    def discover(cls, group, device: torch.device) -> "Topology":
        """Collective over `group`: every rank contributes (its global rank, a digest of its node key).
        Tensors on the model's device, so NCCL needs no current-device setup."""
        mine = torch.tensor([dist.get_rank(), zlib.crc32(_node_key().encode())], dtype=torch.int64, device=device)
        everyone = [torch.empty_like(mine) for _ in range(group.size())]
        dist.all_gather(everyone, mine, group=group)
        by_key: dict = {}
        for rank, key in (entry.tolist() for entry in everyone):
            by_key.setdefault(key, []).append(rank)
        return cls(nodes=sorted((sorted(ranks) for ranks in by_key.values()), key=lambda n: n[0]))

    @property
    def uniform(self) -> bool:
        return len({len(node) for node in self.nodes}) == 1

    def node_of(self, rank: int) -> List[int]:
        return next(node for node in self.nodes if rank in node)


def _node_key() -> str:
    """torchrun's GROUP_RANK (node rank), else NODE_RANK, else rank // LOCAL_WORLD_SIZE, else the host."""
    for name in ("GROUP_RANK", "NODE_RANK"):
        if os.environ.get(name, "") != "":
            return f"node{os.environ[name]}"
    local = os.environ.get("LOCAL_WORLD_SIZE", "")
    if local.isdigit() and int(local) > 0:
        return f"node{dist.get_rank() // int(local)}"
    return socket.gethostname()


class LaneWorker:
    """One thread that runs a lane's bucket reductions in submission order."""

    def __init__(self, name: str):
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, work: Callable[[], torch.Tensor], future: torch.futures.Future, stream=None) -> None:
        self._queue.put((work, future, stream))

    def close(self) -> None:
        self._queue.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)  # a lane stuck on a dead peer must not hold up exit

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            work, future, stream = item
            try:
                if stream is not None:
                    with torch.cuda.device(stream.device), torch.cuda.stream(stream):
                        result = work()
                        future.set_result(result)
                else:
                    future.set_result(work())
            except BaseException as error:  # noqa: BLE001 - handed to DDP, which raises it in backward
                future.set_exception(error)


@dataclasses.dataclass
class Lane:
    index: int
    group: object                   # every rank of the DDP group
    intra: Optional[object] = None  # hierarchical: this rank's node (None when nodes have one rank)
    inter: Optional[object] = None  # hierarchical: peers across nodes (None when not a member / one node)
    leader: Optional[int] = None    # hierarchical over unequal nodes: global rank of this node's leader
    worker: Optional[LaneWorker] = None

    def groups(self):
        return [g for g in (self.group, self.intra, self.inter) if g is not None]


def _new_group(ranks, backend):
    return dist.new_group(ranks=ranks, backend=backend)


def build_lanes(streams: int, ranks: List[int], backend: str, topology: Optional[Topology]) -> List[Lane]:
    """Collective over the default group: every rank creates the same groups in the same order.

    With a topology (hierarchical), each lane also gets intra-node groups and inter-node groups:
    per-local-rank shard groups when every node has the same number of ranks, else a group of the
    nodes' leaders (their lowest rank)."""
    me = dist.get_rank()
    lanes = []
    for index in range(streams):
        lane = Lane(index=index, group=_new_group(ranks, backend))
        if topology is not None:
            node = topology.node_of(me)
            for members in topology.nodes:
                if len(members) > 1:
                    group = _new_group(members, backend)
                    if me in members:
                        lane.intra = group
            if len(topology.nodes) > 1 and topology.uniform:
                for local in range(len(node)):
                    peers = [members[local] for members in topology.nodes]
                    group = _new_group(peers, backend)
                    if me in peers:
                        lane.inter = group
            elif len(topology.nodes) > 1:
                leaders = [members[0] for members in topology.nodes]
                group = _new_group(leaders, backend)
                lane.leader = node[0]
                if me in leaders:
                    lane.inter = group
        lane.worker = LaneWorker(f"acspeed-lane{index}")
        lanes.append(lane)
    return lanes


def close_lanes(lanes: List[Lane]) -> None:
    """Stops the workers and releases the lanes' process groups (a local operation)."""
    for lane in lanes:
        if lane.worker is not None:
            lane.worker.close()
            lane.worker = None
    if not dist.is_initialized():
        return
    for lane in lanes:
        for group in lane.groups():
            try:
                dist.destroy_process_group(group)
            except (RuntimeError, ValueError, KeyError) as error:
                _log.warn(f"could not release a lane process group: {error}", once="lane-release")
        lane.group = lane.intra = lane.inter = None
