"""The DDP comm hook that realises a config: algorithm x streams x compression.

    state = HookState.create(config, group, params)   # collective: builds lanes, probes the backend
    ddp.register_comm_hook(state, comm_hook)          # acspeed does this at construction (install)

Per bucket, in the hook call (DDP's backward thread; see issue.py for why the order is the same on
every rank and how it is checked): the bucket goes to lane index % K; it is divided by the world
size W, packed when needed into a buffer reused across steps (buffers.py: compressed to fp16/bf16
the way torch's compress hooks do it, or zero-padded for a sharded algorithm), and its collectives
are issued asynchronously (algorithms.py, issue.py). The future returned to DDP completes after a
callback has unpacked the result into the bucket.

Compression powersgd (powersgd.py): from the config's start step, a bucket holding gradient
matrices is reduced as low-rank factors with error feedback, through the same issuer and lanes.
Its guard: a bucket whose reduced factors or 1-D sums hold NaN/Inf never updates the factors and
residuals; with the guard on (no GradScaler; flat algorithms) it keeps its raw gradients and is
reduced again uncompressed like a guarded fp16 bucket; otherwise the non-finite result reaches the
gradients (a GradScaler backs off; hierarchical's intra-node reduce has consumed the raw ones).

Compression guard (when AMP's GradScaler is not in use, scaler.py says how that is detected, and
the compressed type's range is narrower than the gradients': fp16 for fp32 gradients, not bf16,
which has fp32's exponent range, so a sum it cannot hold would not be finite uncompressed either;
see _can_overflow): the reduced copy is identical on every rank, so every rank reaches the same
verdict. A bucket whose reduced copy holds NaN/Inf (an overflow, or a non-finite gradient) is
reduced again uncompressed, in the step's last hook call, which waits once for the step's compressed results
(the only host synchronisation of the step, and only when the guard is on; on the CPU nothing
else waits). HookState.guard_fallbacks counts those buckets; the first one is a warning. With a
GradScaler in use non-finite values pass through, so the scaler sees them and backs off.

An observer (acspeed.probes.BucketObserver, via `attach_observer`) sees bucket_launched(index,
nbytes) on the hook's thread right before the bucket's first collective, and bucket_completed(index)
before the future DDP waits on completes.
"""
import dataclasses
from typing import TYPE_CHECKING, Callable, Dict, List, Optional

import torch
import torch.distributed as dist

from .. import _log, _runtime, decision, scaler
from . import powersgd
from .algorithms import ALGORITHMS
from .buffers import Scratch
from .collectives import PROBES, Collectives
from .issue import Job, block_stream, issuer_for
from .lanes import MAX_LANES, Lane, Topology, agree, build_lanes, close_lanes, describe_failures

if TYPE_CHECKING:
    from .._core import CommConfig


def _wire_dtype(config: "CommConfig") -> Optional[torch.dtype]:
    """The dtype a cast compression (fp16, bf16) sends buckets in, from the runtime's compression table
    (runtime/include/acspeed/comm_methods.h); None: the gradients' own (uncompressed, or a low-rank
    compression's factors, see powersgd.py)."""
    name = config.compression_info.cast_dtype
    return getattr(torch, name) if name else None


def _nonfinite(tensor: torch.Tensor) -> torch.Tensor:
    """A 0-d bool tensor on the tensor's device: does it hold a NaN or an Inf? One pass (aminmax
    propagates NaN; an Inf is the min or the max), many times cheaper than isfinite().all()."""
    low, high = torch.aminmax(tensor)
    return ~(torch.isfinite(low) & torch.isfinite(high))


def _can_overflow(compressed: torch.dtype, original: torch.dtype) -> bool:
    """Can a sum that `original` holds be too large for `compressed`? Only when `compressed`'s
    largest value is smaller by more than rounding at the edge of the range (bf16 against fp32: no;
    its largest value is within 0.4% of fp32's). Where it cannot, a non-finite compressed sum means
    a non-finite gradient, which re-sending uncompressed would not make finite: the guard would only
    cost a pass over every bucket."""
    return torch.finfo(compressed).max < torch.finfo(original).max / 2


@dataclasses.dataclass
class _Guarded:
    """A compressed bucket whose verdict the step's last hook call settles."""
    job: Job
    flat: torch.Tensor
    unpack: Callable[[], None]
    flag: Optional[torch.Tensor] = None   # set by the job's finish: NaN/Inf in the reduced copy
    ready: Optional[object] = None        # CUDA: event recorded after the flag, on the callback's stream

    def hold(self, flag: torch.Tensor) -> bool:
        """Called by the job's finish with the reduced copy's NaN/Inf flag. True: the step's last hook
        call completes the bucket (CUDA: always, it reads every flag at once after `ready`, so there is
        no host sync here; CPU: when the flag is set, a plain read of host memory)."""
        self.flag = flag
        if self.flat.is_cuda:
            self.ready = torch.cuda.Event()
            self.ready.record()
            return True
        return bool(flag)


class _LocalGraph(torch.autograd.Function):
    """backward(create_graph=True): DDP copies gradients that carry a graph into the bucket, so the
    buffer the hook gets requires grad, and autograd refuses the hook's in-place and out= operations
    on it and on its views. The hook reduces a detached alias instead; what it hands back to DDP holds
    the reduced values with the graph DDP's own allreduce (and torch's allreduce_hook) leave on it:
    the local gradients divided by the world size (higher-order gradients are not synchronised
    across ranks, as torch warns), so second-order gradients are plain DDP's."""

    @staticmethod
    def forward(ctx, local: torch.Tensor, reduced: torch.Tensor, world_size: int) -> torch.Tensor:
        ctx.world_size = world_size
        return reduced.clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad / ctx.world_size, None, None


def _with_local_graph(local: torch.Tensor, reduced: torch.Tensor, world_size: int) -> torch.Tensor:
    with torch.enable_grad():  # the callback may run on a backend thread
        return _LocalGraph.apply(local, reduced, world_size)


class HookState:
    """What the hook needs: the config, the lanes, the backend's collectives, the issuer, the
    reusable buffers, an optional observer, the guard's counter, and the user's hook once they
    register one. One per DDP model."""

    def __init__(self, config: "CommConfig", lanes: List[Lane], collectives: Collectives, world_size: int,
                 compression: Optional[torch.dtype], device: torch.device, issuer, strict: bool,
                 psgd: Optional[powersgd.PowerSgd] = None):
        self.config = config
        self.lanes = lanes
        self.collectives = collectives
        self.world_size = world_size
        self.compression = compression
        self.device = device
        self.algorithm = ALGORITHMS[config.algorithm]
        self.issuer = issuer
        self.strict = strict
        self.observer = None
        self.user_hook = None          # (hook, state) registered by the user after construction
        self.guard_fallbacks = 0       # buckets reduced uncompressed because the compressed sum was not finite
        self.test_delays: Dict[int, float] = {}  # test-only seam: lane -> seconds slept before each collective
        self.scratch = Scratch()
        self.powersgd = psgd           # compression powersgd: the factors and error feedback (powersgd.py)
        self.param_names: Dict[int, str] = {}  # id(parameter) -> its name in the DDP module (PowerSGD's keys)
        self._expected = 0             # the bucket index DDP must hand over next
        self._compressing = False      # powersgd: this step's buckets are compressed (past the start step)
        self._guard = False            # this step's buckets are guarded
        self._guarded: List[_Guarded] = []   # this step's guarded buckets, in bucket order

    @classmethod
    def create(cls, config: "CommConfig", group, params: List[torch.nn.Parameter]) -> "HookState":
        """Collective over the default group (new process groups) and over `group` (topology,
        agreement, probes). If any rank cannot build its part, every rank raises RuntimeError (none
        is left waiting) naming the ranks and their errors."""
        backend = str(dist.get_backend(group))
        ranks = sorted(dist.get_process_group_ranks(group))
        device = params[0].device if params else torch.device("cpu")
        algorithm = ALGORITHMS[config.algorithm]
        issuer = issuer_for(device, backend)
        streams = config.streams
        if streams > MAX_LANES:
            _log.warn(f"streams {streams} is above acspeed's limit of {MAX_LANES} lanes (each lane costs process "
                      f"groups, on NCCL communicators with their own GPU buffers): using {MAX_LANES}",
                      once=("max-lanes", streams))
            streams = MAX_LANES
        topology = Topology.discover(group, device) if config.algorithm_info.by_node else None
        psgd = None
        roles = algorithm.roles
        if config.compression_info.form == "low_rank":  # powersgd.py is the low-rank compression
            psgd = powersgd.PowerSgd(config.powersgd_rank, config.powersgd_start_step,
                                     len(topology.nodes) if topology is not None else 1)
            roles = powersgd.roles(algorithm)
            if not any(p.dim() >= 2 for p in params):
                _log.info("compression powersgd: every gradient of this model is 1-D (biases, norms), so there is "
                          "nothing to factor: they are reduced uncompressed", once=("powersgd-all-1d", id(params[0])
                                                                                    if params else 0))
        lanes, error = build_lanes(streams, ranks, backend, topology, roles, issuer.group_per_phase,
                                   device if issuer.uses_streams else None)
        try:
            failed = agree(group, device, error)
            if failed:
                raise RuntimeError(describe_failures(failed))
            dtypes = {p.dtype for p in params if p.requires_grad and p.is_floating_point()}
            wanted = _wire_dtype(config)
            ops = ("all_reduce",) if config.algorithm == "allreduce" else PROBES
            collectives = Collectives.probe(lanes[0].group, dtypes | ({wanted} if wanted else set()), device, ops)
            # What the hook cannot build from anything else: an asynchronous all-reduce with a future of
            # the gradients' dtypes (some backends' Work has none), and hierarchical's reduce/broadcast.
            needed = ("all_reduce", "reduce", "broadcast") if algorithm.by_node else ("all_reduce",)
            missing = collectives.missing(needed, dtypes)
            if missing is not None:
                raise RuntimeError(f"the {backend} backend's asynchronous {missing}")
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
        return cls(config, lanes, collectives, dist.get_world_size(group), compression, device, issuer,
                   _runtime.strict_or_off(), psgd)

    def close(self) -> None:
        """Releases the lanes' process groups and the reusable buffers. Idempotent."""
        lanes, self.lanes = self.lanes, []
        close_lanes(lanes)
        self.scratch.clear()

    # --- the hook ---------------------------------------------------------------------------

    def run(self, bucket) -> torch.futures.Future:
        lanes = self.lanes
        if not lanes:
            raise RuntimeError("acspeed's comm hook was used after its lanes were released "
                               "(the DDP model was re-wrapped or closed)")
        index = bucket.index()
        self._check_order(index)
        if index == 0:
            self._compressing = self.powersgd is not None and self.powersgd.active()
            self._guard = (self.compression is not None or self._compressing) and \
                not scaler.in_use(self.device.type, decision.precision())
        flat = bucket.buffer()
        local = None
        if flat.requires_grad:  # backward(create_graph=True): reduce a detached alias (see _LocalGraph)
            local, flat = flat, flat.detach()
        lane = lanes[index % len(lanes)]
        result = torch.futures.Future(devices=[flat.device]) if flat.is_cuda else torch.futures.Future()
        with self.issuer.context(lane):
            job = self._powersgd_job(index, bucket, flat, lane, result) if self._compressing else None
            if job is None:
                job = self._job(index, flat, lane, result, compress=True)
            if self.observer is not None:  # on the thread that issues the collectives, right before them
                self.observer.bucket_launched(index, flat.numel() * flat.element_size())
            self.issuer.advance(block=False)
            self.issuer.start(job)
        if bucket.is_last():
            self._end_step(index + 1)
        if local is not None:
            return result.then(lambda done: _with_local_graph(local, done.value(), self.world_size))
        return result

    def _check_order(self, index: int) -> None:
        expected, self._expected = self._expected, index + 1
        if index == expected:
            return
        message = (f"DDP handed acspeed's comm hook bucket {index} while bucket {expected} was due: buckets must "
                   "arrive in index order (torch's reducer launches them so), or ranks could issue collectives in "
                   "different orders")
        if self.strict:
            raise RuntimeError(f"acspeed (ACSPEED_STRICT=1): {message}")
        _log.warn(f"{message}; continuing from bucket {index}", once=("bucket-order", id(self)))

    def _job(self, index: int, flat: torch.Tensor, lane: Lane, result, compress: bool) -> Job:
        """Divides and packs the bucket (in the issuer's context: on CUDA, the lane stream) and plans
        its collectives. The bucket itself is left untouched while its compressed copy is in flight,
        so the guard can still reduce it uncompressed."""
        dtype = self.compression if compress else None
        if dtype is not None and flat.element_size() <= torch.finfo(dtype).bits // 8:
            dtype = None  # the bucket is no wider than the compressed type
        divisor = self.algorithm.divisor(self.collectives, lane, dtype or flat.dtype)
        numel = flat.numel()
        padded = -(-numel // divisor) * divisor
        if dtype is not None:  # as torch's compress hooks: convert, then divide in the compressed type
            packed = self.scratch.get(index, "packed", padded, dtype, flat.device)
            packed[:numel].copy_(flat)
            packed.div_(self.world_size)
        elif padded != numel:
            packed = self.scratch.get(index, "padded", padded, flat.dtype, flat.device)
            torch.div(flat, self.world_size, out=packed[:numel])
        else:
            packed = flat.div_(self.world_size)

        def shard_for(shard_numel: int) -> torch.Tensor:
            return self.scratch.get(index, "shard", shard_numel, packed.dtype, flat.device)

        def unpack() -> None:
            if packed is not flat:
                flat.copy_(packed[:numel])

        phases = self.algorithm.phases(self.collectives, lane, packed, shard_for)
        if self.powersgd is not None:
            phases = powersgd.plain_phases(self.algorithm, phases)
        guard = dtype is not None and self._guard and _can_overflow(dtype, flat.dtype)
        guarded = _Guarded(job=None, flat=flat, unpack=unpack) if guard else None

        def finish() -> Optional[torch.Tensor]:
            if guarded is not None and guarded.hold(_nonfinite(packed)):
                return None
            unpack()
            return self._completed(index, flat)

        return self._guarded_job(Job(index=index, lane=lane, phases=phases, finish=finish, result=result,
                                     delay_s=self.test_delays.get(lane.index, 0.0)), guarded)

    def _powersgd_job(self, index: int, bucket, flat: torch.Tensor, lane: Lane, result) -> Optional[Job]:
        """The bucket's compressed reduction, or None when it takes the plain path: no gradient of
        two or more dimensions in it, or (hierarchical) no inter-node step to compress."""
        psgd = self.powersgd
        if self.algorithm.by_node and psgd.nodes < 2:
            return None
        layout = powersgd.Layout.of([(self.param_names.get(id(p), f"bucket{index}.{k}"), tuple(p.shape))
                                     for k, p in enumerate(bucket.parameters())], psgd.rank)
        if not layout.matrices:
            return None
        if layout.numel != flat.numel():
            _log.warn(f"PowerSGD: bucket {index}'s buffer ({flat.numel()} elements) is not its gradients laid end "
                      "to end: it is reduced uncompressed", once=("powersgd-layout", id(self), index))
            return None
        me = dist.get_rank()
        leader = me
        if self.algorithm.by_node:
            if lane.leader is not None:
                leader = lane.leader
            elif lane.intra is not None:
                leader = dist.get_global_rank(lane.intra, 0)

        def scratch_get(bucket_index, role, numel, dtype):
            return self.scratch.get(bucket_index, role, numel, dtype, flat.device)

        phases, decompress = powersgd.plan(psgd, index, flat, layout, lane, self.collectives, self.algorithm,
                                           self.world_size, scratch_get, me, leader, _nonfinite)
        psgd.compressed_buckets += 1
        # The guard (no GradScaler): a bucket whose factors are not finite keeps its raw gradients and is
        # reduced again uncompressed. Not for hierarchical: its intra-node reduce consumed the raw gradients.
        guarded = _Guarded(job=None, flat=flat, unpack=lambda: None) \
            if self._guard and not self.algorithm.by_node else None

        def finish() -> Optional[torch.Tensor]:
            bad = decompress(guarded is not None)
            if guarded is not None and guarded.hold(bad):
                return None
            return self._completed(index, flat)

        return self._guarded_job(Job(index=index, lane=lane, phases=phases, finish=finish, result=result,
                                     delay_s=self.test_delays.get(lane.index, 0.0)), guarded)

    def _guarded_job(self, job: Job, guarded: Optional[_Guarded]) -> Job:
        """The job, with its guard entry (if any) tracked for the step's last hook call."""
        if guarded is not None:
            guarded.job = job
            self._guarded.append(guarded)
        return job

    def _completed(self, index: int, flat: torch.Tensor) -> torch.Tensor:
        """The bucket's result is in place: tell the observer before DDP can see it."""
        observer = self.observer
        if observer is not None:
            observer.bucket_completed(index)
        return flat

    def _end_step(self, buckets: int) -> None:
        """The step's last hook call: issue what is still queued, settle the guard, reset."""
        self._expected = 0
        self.issuer.advance(block=True)
        if self._guard:
            self._settle_guard()
        if self.powersgd is not None:
            self.powersgd.end_step(self._compressing)
        self.scratch.keep_only(buckets)

    def _settle_guard(self) -> None:
        """Waits for the step's guarded buckets (their flags exist once their finish callbacks ran),
        reads the flags, completes the finite buckets still open (CUDA) and re-sends the others
        uncompressed, in bucket order: every rank holds the same reduced values, hence the same
        flags, so every rank issues the same re-sends."""
        entries, self._guarded = self._guarded, []
        if not entries:
            return
        for entry in entries:
            entry.job.finished.wait()  # the finish callback ran (CPU: waits for the compressed reduction)
        if self.device.type == "cuda":
            current = torch.cuda.current_stream(self.device)
            for entry in entries:
                current.wait_event(entry.ready)
            nonfinite = torch.stack([entry.flag for entry in entries]).tolist()  # the step's one host sync
        else:
            nonfinite = [bool(entry.flag) for entry in entries]
        resend = []
        for entry, bad in zip(entries, nonfinite):
            if bad:
                resend.append(entry)
            elif entry.ready is not None:  # CUDA: finite, unpack on the lane stream after the flag
                with self.issuer.context(entry.job.lane):
                    torch.cuda.current_stream(self.device).wait_event(entry.ready)
                    entry.unpack()
                    entry.job.result.set_result(self._completed(entry.job.index, entry.flat))
        for entry in resend:
            self.guard_fallbacks += 1
            _log.warn(f"{self.config.compression} compression gave NaN/Inf in bucket {entry.job.index} "
                      f"(overflow or a non-finite gradient): that bucket was reduced uncompressed "
                      f"(fallback #{self.guard_fallbacks}; later ones are counted in HookState.guard_fallbacks)",
                      once=("guard", id(self)))
            lane = entry.job.lane
            with self.issuer.context(lane):
                self.issuer.start(self._job(entry.job.index, entry.flat, lane, entry.job.result, compress=False))
        self.issuer.advance(block=True)


def comm_hook(state: HookState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """acspeed's DDP comm hook. Once the user registers their own hook, it runs theirs."""
    if state.user_hook is not None:
        hook, user_state = state.user_hook
        return hook(user_state, bucket)
    return state.run(bucket)
