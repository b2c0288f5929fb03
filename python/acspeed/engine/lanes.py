"""Communication lanes: the K extra process groups ("streams") a config spreads gradient buckets over.

Bucket i goes to lane i % K. A lane has no thread of its own: the comm hook issues the lane's
collectives asynchronously (see issue.py). What a lane holds:

  * slots: one process group per phase of the algorithm (algorithms.py says which role each phase
    has: every rank, this rank's node, or its peers on the other nodes). Where the issuer orders
    phases by completion (gloo), every phase gets a group of its own, so the order of collectives on
    each group is bucket order on every rank whenever a phase happens to be issued. Where CUDA
    streams order the phases (NCCL), phases of the same role share one communicator.
  * stream: on CUDA, the lane's own CUDA stream, where its packing kernels run; it waits on the
    compute CUDA stream at hook time, and each collective's NCCL CUDA stream waits on it at issue time.

At most MAX_LANES lanes are built (each costs process groups; on NCCL, communicators with their own
GPU buffers); a config asking for more gets MAX_LANES and a warning.
"""
import contextlib
import dataclasses
import os
import socket
import zlib
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist

from .. import _log

MAX_LANES = 8
ROLES = ("all", "intra", "inter")


def agree(group, device: torch.device, error: Optional[str]) -> List[Tuple[int, str]]:
    """Collective over `group`: (global rank, error) of every rank that reports an error; [] when
    none does. Every rank calls it, failed or not, so no rank is left waiting in a collective."""
    flags = torch.zeros(group.size(), dtype=torch.int64, device=device)
    if error is not None:
        flags[group.rank()] = 1
    dist.all_reduce(flags, group=group)
    failed = [rank for rank, flag in enumerate(flags.tolist()) if flag]
    if not failed:
        return []
    texts: List[Optional[str]] = [None] * group.size()
    with torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext():  # NCCL: the current device
        dist.all_gather_object(texts, error, group=group)
    return [(dist.get_global_rank(group, rank), texts[rank]) for rank in failed]


def describe_failures(failed: List[Tuple[int, str]]) -> str:
    return "acspeed's comm hook could not be set up on rank(s) " + "; ".join(f"{rank} ({text})" for rank, text in failed)


@dataclasses.dataclass
class Topology:
    """Which global ranks of the DDP group share a node, nodes ordered by their first rank."""
    nodes: List[List[int]]

    @classmethod
    def discover(cls, group, device: torch.device) -> "Topology":
        """Collective over `group`: every rank contributes (its global rank, a digest of its node key).
        If a rank cannot name its node, every rank raises (agree() first), so none is left waiting
        in a later collective. Tensors on the model's device (NCCL needs no current device)."""
        key, problem = 0, None
        try:
            key = zlib.crc32(_node_key().encode())
        except (OSError, ValueError) as error:
            problem = f"cannot tell which node it is on: {error}"
        failed = agree(group, device, problem)
        if failed:
            raise RuntimeError(describe_failures(failed))
        mine = torch.tensor([dist.get_rank(), key], dtype=torch.int64, device=device)
        everyone = [torch.empty_like(mine) for _ in range(group.size())]
        dist.all_gather(everyone, mine, group=group)
        by_key: Dict[int, List[int]] = {}
        for rank, digest in (entry.tolist() for entry in everyone):
            by_key.setdefault(digest, []).append(rank)
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


@dataclasses.dataclass
class Lane:
    index: int
    slots: List[Optional[object]]   # per phase: the group it runs on (None: this rank takes no part)
    group: object                   # every rank of the DDP group (the backend check runs here)
    intra: Optional[object] = None  # hierarchical: this rank's node (None when its node has one rank)
    inter: Optional[object] = None  # hierarchical: peers across nodes (None when not a member / one node)
    leader: Optional[int] = None    # hierarchical over unequal nodes: global rank of this node's leader
    stream: Optional[object] = None  # CUDA: the lane's own CUDA stream
    owned: List[object] = dataclasses.field(default_factory=list)  # the groups of it this rank is in

    def groups(self) -> List[object]:
        return list(self.owned)


def _new_group(ranks, backend):
    return dist.new_group(ranks=ranks, backend=backend)


class _Creator:
    """Creates groups in the same order on every rank. A rank whose creation fails keeps taking part
    in the later creations (new_group is collective: skipping one would leave the others waiting in
    it) and reports the first failure afterwards, when the ranks agree on the outcome."""

    def __init__(self, backend: str):
        self.backend = backend
        self.created: List[object] = []
        self.error: Optional[str] = None

    def new(self, ranks: Sequence[int], member: bool):
        try:
            group = _new_group(list(ranks), self.backend)
        except (RuntimeError, ValueError) as error:
            if self.error is None:
                self.error = f"creating a process group of ranks {list(ranks)} failed: {error}"
            return None
        if not member:  # torch's non-member placeholder: nothing to release
            return None
        self.created.append(group)
        return group


def _role_group(creator: _Creator, role: str, ranks: List[int], topology: Optional[Topology], lane: Lane):
    """Creates the groups of one role (every rank creates every node's groups) and returns this
    rank's, or None when it is in none."""
    me = dist.get_rank()
    if role == "all":
        return creator.new(ranks, True)
    if topology is None:
        raise ValueError(f"role {role} needs a topology")
    node = topology.node_of(me)
    mine = None
    if role == "intra":
        for members in topology.nodes:
            if len(members) > 1:
                group = creator.new(members, me in members)
                mine = group if group is not None else mine
        return mine
    if len(topology.nodes) == 1:
        return None
    if topology.uniform:
        for local in range(len(node)):
            peers = [members[local] for members in topology.nodes]
            group = creator.new(peers, me in peers)
            mine = group if group is not None else mine
        return mine
    lane.leader = node[0]
    leaders = [members[0] for members in topology.nodes]
    return creator.new(leaders, me in leaders)


def build_lanes(streams: int, ranks: List[int], backend: str, topology: Optional[Topology],
                roles: Sequence[str], group_per_phase: bool,
                stream_device: Optional[torch.device]) -> Tuple[List[Lane], Optional[str]]:
    """Collective over the default group: every rank creates the same groups in the same order.
    With `stream_device`, each lane also gets a CUDA stream there. Returns the lanes and the first
    local failure (None when all went well); the lanes come back on failure too, for close_lanes."""
    creator = _Creator(backend)
    lanes = []
    for index in range(streams):
        lane = Lane(index=index, slots=[], group=None)
        lane.group = creator.new(ranks, True)
        first: Dict[str, Optional[object]] = {}
        for role in roles:
            if role not in ROLES:
                raise ValueError(f"unknown lane role {role}")
            if role in first and not group_per_phase:
                group = first[role]
            elif role == "all" and role not in first:
                group = lane.group
            else:
                group = _role_group(creator, role, ranks, topology, lane)
            first.setdefault(role, group)
            lane.slots.append(group)
        lane.intra, lane.inter = first.get("intra"), first.get("inter")
        lane.owned = list(creator.created)
        creator.created = []
        if stream_device is not None and creator.error is None:
            try:
                lane.stream = torch.cuda.Stream(device=stream_device)
            except RuntimeError as error:
                creator.error = f"cannot create a CUDA stream on {stream_device}: {error}"
        lanes.append(lane)
    return lanes, creator.error


def close_lanes(lanes: List[Lane]) -> None:
    """Releases the lanes' process groups (a local operation). Idempotent."""
    if not dist.is_initialized():
        return
    for lane in lanes:
        for group in lane.owned:
            try:
                dist.destroy_process_group(group)
            except (RuntimeError, ValueError, KeyError) as error:
                _log.warn(f"could not release a lane process group: {error}", once="lane-release")
        lane.owned = []
        lane.slots = []
        lane.group = lane.intra = lane.inter = None
        lane.stream = None
