"""The DDP comm hook that realises a config: algorithm x streams x compression.

    state = HookState.create(ddp, config)       # collective: builds lanes, probes the backend
    ddp.register_comm_hook(state, comm_hook)    # acspeed does this at construction

Algorithms, for a flat bucket of n elements averaged over W ranks:
  allreduce       - all-reduce of the bucket (what DDP does, but on the bucket's lane);
  reduce_scatter  - reduce-scatter to W shards, then all-gather;
  hierarchical    - nodes of L ranks: intra-node reduce-scatter to L shards, all-reduce of each shard
                    among the ranks holding the same shard on the other nodes, intra-node all-gather.
                    Nodes of unequal size: reduce to the node's leader, all-reduce among leaders,
                    broadcast from the leader.
Compression (fp16/bf16) reduces a converted copy; if the reduced copy holds NaN/Inf (overflow, or a
non-finite gradient), that bucket is reduced again uncompressed for this step, and acspeed says so.
The reduced copy is identical on every rank, so every rank takes the same branch.

An observer (acspeed.probes.BucketObserver, via `attach_observer` or `HookState.observer`) sees
bucket_launched(index, nbytes) on the lane thread right before the bucket's collectives are issued,
and bucket_completed(index) from a callback chained on the bucket's future, before the future DDP
waits on completes.
"""
import threading
import weakref
from typing import List, Optional

import torch
import torch.distributed as dist

from . import _log
from .collectives import Collectives
from .config import Config
from .lanes import Lane, Topology, build_lanes, close_lanes


def _pad(tensor: torch.Tensor, multiple: int) -> torch.Tensor:
    extra = -tensor.numel() % multiple
    return tensor if extra == 0 else torch.cat([tensor, tensor.new_zeros(extra)])


def _allreduce(coll: Collectives, lane: Lane, flat: torch.Tensor) -> torch.Tensor:
    coll.all_reduce(flat, lane.group)
    return flat


def _reduce_scatter(coll: Collectives, lane: Lane, flat: torch.Tensor) -> torch.Tensor:
    padded = _pad(flat, lane.group.size())
    shard = coll.reduce_scatter(padded, lane.group)
    coll.all_gather(padded, shard, lane.group)
    return padded[:flat.numel()]


def _hierarchical(coll: Collectives, lane: Lane, flat: torch.Tensor) -> torch.Tensor:
    if lane.leader is not None:  # nodes of unequal size: through the nodes' leaders
        if lane.intra is not None:
            dist.reduce(flat, dst=lane.leader, group=lane.intra)
        if lane.inter is not None:
            coll.all_reduce(flat, lane.inter)
        if lane.intra is not None:
            dist.broadcast(flat, src=lane.leader, group=lane.intra)
        return flat
    if lane.intra is None:  # one rank per node: the inter-node step is everything
        if lane.inter is not None:
            coll.all_reduce(flat, lane.inter)
        return flat
    padded = _pad(flat, lane.intra.size())
    shard = coll.reduce_scatter(padded, lane.intra)
    if lane.inter is not None:
        coll.all_reduce(shard, lane.inter)
    coll.all_gather(padded, shard, lane.intra)
    return padded[:flat.numel()]


_ALGORITHMS = {"allreduce": _allreduce, "reduce_scatter": _reduce_scatter, "hierarchical": _hierarchical}


class HookState:
    """What the hook needs: the config, the lanes, the backend's collectives, an optional observer,
    the guard's counter, and the user's hook once they register one."""

    def __init__(self, config: Config, lanes: List[Lane], collectives: Collectives, world_size: int,
                 compression: Optional[torch.dtype]):
        self.config = config
        self.lanes = lanes
        self.collectives = collectives
        self.world_size = world_size
        self.compression = compression
        self.algorithm = _ALGORITHMS[config.algorithm]
        self.observer = None
        self.user_hook = None          # (hook, state) registered by the user after construction
        self.guard_fallbacks = 0       # buckets reduced uncompressed because the compressed sum was not finite
        self._lock = threading.Lock()

    @classmethod
    def create(cls, config: Config, group, params: List[torch.nn.Parameter]) -> "HookState":
        """Collective over the default group (new process groups), then over `group` (probes)."""
        backend = dist.get_backend(group)
        ranks = sorted(dist.get_process_group_ranks(group))
        device = params[0].device if params else torch.device("cpu")
        topology = Topology.discover(group, device) if config.algorithm == "hierarchical" else None
        lanes = build_lanes(config.streams, ranks, backend, topology)
        try:
            dtypes = {p.dtype for p in params if p.requires_grad and p.is_floating_point()}
            wanted = config.compression_dtype
            needs_probe = config.algorithm != "allreduce" or wanted is not None
            collectives = Collectives.probe(lanes[0].group, dtypes | ({wanted} if wanted else set()), device) \
                if needs_probe else Collectives(native={})
        except BaseException:
            close_lanes(lanes)
            raise
        compression = wanted
        if wanted is not None and not collectives.supports("all_reduce", wanted):
            _log.warn(f"the {backend} backend cannot all-reduce {config.compression} in this torch: "
                      "gradients are reduced uncompressed", once=("no-compression", backend, config.compression))
            compression = None
        emulated = collectives.emulated()
        if emulated and config.algorithm != "allreduce":
            _log.info(f"the {backend} backend lacks {', '.join(emulated)}: acspeed builds "
                      f"{'it' if len(emulated) == 1 else 'them'} from all_reduce / all_gather",
                      once=("emulated", backend, tuple(emulated)))
        return cls(config, lanes, collectives, dist.get_world_size(group), compression)

    def close(self) -> None:
        """Stops the lanes' workers and releases their process groups. Idempotent."""
        with self._lock:
            lanes, self.lanes = self.lanes, []
        close_lanes(lanes)

    # Runs on the lane's worker thread.
    def _reduce(self, lane: Lane, flat: torch.Tensor, index: int, observer) -> torch.Tensor:
        if observer is not None:  # on the thread that issues the bucket's collectives, right before them
            observer.bucket_launched(index, flat.numel() * flat.element_size())
        flat.div_(self.world_size)
        dtype = self.compression
        if dtype is None or flat.element_size() <= torch.finfo(dtype).bits // 8:
            return self.algorithm(self.collectives, lane, flat)
        packed = self.algorithm(self.collectives, lane, flat.to(dtype))
        if bool(torch.isfinite(packed).all()):
            return flat.copy_(packed)
        with self._lock:
            self.guard_fallbacks += 1
            count = self.guard_fallbacks
        _log.warn(f"{self.config.compression} compression gave NaN/Inf in bucket {index} "
                  f"(overflow or a non-finite gradient): that bucket was reduced uncompressed "
                  f"(fallback #{count}; later ones are counted in HookState.guard_fallbacks)",
                  once=("guard", id(self)))
        return self.algorithm(self.collectives, lane, flat)

    def run(self, bucket) -> torch.futures.Future:
        flat = bucket.buffer()
        index = bucket.index()
        lanes = self.lanes
        if not lanes:
            raise RuntimeError("acspeed's comm hook was used after its lanes were released "
                               "(the DDP model was re-wrapped or closed)")
        lane = lanes[index % len(lanes)]
        observer = self.observer
        if flat.is_cuda:
            future = torch.futures.Future(devices=[flat.device])
            stream = torch.cuda.current_stream(flat.device)
        else:
            future = torch.futures.Future()
            stream = None
        lane.worker.submit(lambda: self._reduce(lane, flat, index, observer), future, stream)
        if observer is None:
            return future

        def completed(done: torch.futures.Future) -> torch.Tensor:
            observer.bucket_completed(index)
            return done.value()
        return future.then(completed)


def comm_hook(state: HookState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """acspeed's DDP comm hook. Once the user registers their own hook, it runs theirs."""
    if state.user_hook is not None:
        hook, user_state = state.user_hook
        return hook(user_state, bucket)
    return state.run(bucket)


def state_of(ddp) -> Optional[HookState]:
    """The acspeed hook state of a DDP model, or None when acspeed registered no hook on it."""
    return getattr(ddp, "_acspeed_hook_state", None)


def attach_observer(ddp, observer) -> None:
    """Attaches a BucketObserver (acspeed.probes) to a DDP model's acspeed hook; None detaches.
    Raises ValueError when acspeed registered no hook on that model (DDP defaults need none)."""
    state = state_of(ddp)
    if state is None:
        raise ValueError("this DDP model has no acspeed comm hook (its config keeps DDP's built-in "
                         "allreduce, or acspeed stepped aside), so there is nothing to observe")
    state.observer = observer


def install(ddp, config: Config, group) -> HookState:
    """Builds the hook state for `ddp` and registers the hook (collective). The lanes are released
    when the DDP object is garbage-collected, or earlier by HookState.close()."""
    state = HookState.create(config, group, [p for p in ddp.module.parameters() if p.requires_grad])
    try:
        original_register_comm_hook()(ddp, state, comm_hook)
    except BaseException:
        state.close()
        raise
    ddp._acspeed_hook_state = state
    weakref.finalize(ddp, state.close)
    return state


def original_register_comm_hook():
    """DDP's own register_comm_hook, also after acspeed patched it."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    method = DDP.register_comm_hook
    return getattr(method, "_acspeed_original", method)


def yield_to_user(ddp, state: HookState, user_state, user_hook) -> None:
    """The user registered their own comm hook after acspeed did: theirs runs from now on (DDP keeps
    one hook slot, so acspeed's hook hands every bucket to theirs) and acspeed's lanes are released."""
    check = getattr(ddp, "_check_comm_hook", None)
    if check is not None:
        check(user_hook)
    name = getattr(user_hook, "__qualname__", repr(user_hook))
    state.user_hook = (user_hook, user_state)
    if getattr(ddp, "logger", None) is not None:
        ddp.logger._set_comm_hook_name(name)
    if hasattr(ddp, "_comm_hooks"):
        ddp._comm_hooks = [(user_hook, user_state)]
    state.close()
    _log.info(f"your comm hook {name} replaces acspeed's ({state.config.algorithm}, "
              f"{state.config.streams} stream(s), compression {state.config.compression})",
              once=("user-hook", name))


def python_builtin_hook(comm_hook_type):
    """torch's Python hook doing what a built-in C++ comm hook type does (same numerics)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks  # noqa: PLC0415
    twins = {dist.BuiltinCommHookType.ALLREDUCE: default_hooks.allreduce_hook,
             dist.BuiltinCommHookType.FP16_COMPRESS: default_hooks.fp16_compress_hook}
    if comm_hook_type not in twins:
        raise ValueError(f"built-in comm hook {comm_hook_type} is not one of {', '.join(map(str, twins))}")
    return twins[comm_hook_type]
