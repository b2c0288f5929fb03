"""The DDP comm hook that realises a config: algorithm x streams x compression.

    state = HookState.create(config, group, params)   # collective: builds lanes, checks the backend's collectives
    ddp.register_comm_hook(state, comm_hook)          # acspeed does this at construction (install)

Per bucket, in the hook call (DDP's backward thread; see issue.py for why the order is the same on
every rank and how it is checked): the bucket goes to lane index % K; the config's compressor
(compressor.py) turns it into a job: for the plain path and the cast compressions (cast.py) it is
divided by the world size W, packed when needed into a buffer reused across steps (buffers.py:
compressed to fp16/bf16 the way torch's compress hooks do it, or zero-padded for a sharded
algorithm); its collectives are issued asynchronously (algorithms.py, issue.py). The future
returned to DDP completes after a callback has unpacked the result into the bucket.

The config can be replaced between steps (replace_config): the new one takes over at the next
bucket 0, so every bucket of a step sees one config on every rank.

Compression powersgd (powersgd.py): from the config's start step, a bucket holding gradient
matrices is reduced as low-rank factors with error feedback, through the same issuer and lanes.
Its non-finite fallback: a bucket whose reduced factors or 1-D sums hold NaN/Inf never updates the factors and
residuals; with the fallback on (no GradScaler; flat algorithms) it keeps its raw gradients and is
reduced again uncompressed like a checked fp16 bucket; otherwise the non-finite result reaches the
gradients (a GradScaler backs off; hierarchical's intra-node reduce has consumed the raw ones).

Non-finite fallback (when AMP's GradScaler is not in use, scaler.py says how that is detected, and
the compressed type's range is narrower than the gradients': fp16 for fp32 gradients, not bf16,
which has fp32's exponent range, so a sum it cannot hold would not be finite uncompressed either;
see fallback.can_overflow): the reduced copy is identical on every rank, so every rank reaches the same
verdict. A bucket whose reduced copy holds NaN/Inf (an overflow, or a non-finite gradient) is
reduced again uncompressed, in the step's last hook call, which waits once for the step's compressed results
(the only host synchronisation of the step, and only when the fallback is on; on the CPU nothing
else waits). On the CPU that call also checks and unpacks each fp16 bucket's reduced copy, in one
C++ pass (fallback.unpack_if_finite), bucket by bucket as each arrives, and completes the finite
buckets' futures: the backend's thread that completes a reduction goes straight on to the next
transfer, as under torch's fp16_compress_hook, while the check and copy run on the hook's thread,
which waits for the step's later transfers anyway (bench/runtime/RESULTS.md: 0.95 of torch's hook
at 5 MiB buckets with the unpack in the callback, 0.98 with it here, side by side). The step's last
bucket, on a one-phase algorithm with no earlier bucket re-sent, is the exception: if its reduction is
still in flight when that call gets to it, its own finish settles it (unpacks, or re-sends it), and the
call returns, so that DDP's finalize_backward copies the other buckets into the gradients during the
step's last transfer, as under torch's hook (HookState.left_to_finish counts those buckets).
HookState.nonfinite_fallbacks counts those buckets; the first one is a warning. With a
GradScaler in use non-finite values pass through, so the scaler sees them and backs off.

An observer (acspeed.probes.BucketObserver, via `attach_observer`) sees bucket_launched(index,
nbytes) on the hook's thread right before the bucket's first collective, and bucket_completed(index)
before the future DDP waits on completes.
"""
from typing import TYPE_CHECKING, Dict, List, Optional

import torch
import torch.distributed as dist

from .. import _log, _runtime, decision, scaler
from .algorithms import ALGORITHMS
from .buffers import Scratch
from .cast import Cast
from .collectives import CHECKED_OPS, Collectives
from .compressor import Compressor, compressor_for
from .fallback import FallbackEntry
from .issue import Job, issuer_for
from .powersgd import PowerSgd
from .lanes import MAX_LANES, Lane, Topology, agree, build_lanes, close_lanes, describe_failures

if TYPE_CHECKING:
    from .._core import CommConfig


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


class _Wiring:
    """The lanes of one config (its algorithm, streams and lane slots) with the backend's collectives
    checked on them and the compressor built with them. A hook state keeps the wiring of every
    config it ran, so a config that comes back (online tuning alternates two) reuses its lanes."""

    def __init__(self, key: tuple, lanes: List[Lane], collectives: Collectives, compressor: Compressor):
        self.key, self.lanes, self.collectives, self.compressor = key, lanes, collectives, compressor

    @staticmethod
    def key_of(config: "CommConfig", algorithm, compressor: Compressor) -> tuple:
        return config.algorithm, min(config.streams, MAX_LANES), tuple(compressor.roles(algorithm))

    def checked(self, dtype: Optional[torch.dtype]) -> bool:
        """Whether the backend's all-reduce of `dtype` (a compressor's wire dtype) was checked here."""
        return dtype is None or ("all_reduce", dtype) in self.collectives.native

    @classmethod
    def build(cls, config: "CommConfig", group, params: List[torch.nn.Parameter], issuer,
              topology: Optional[Topology], device: torch.device) -> "_Wiring":
        """Collective over the default group (new process groups) and over `group` (agreement,
        the backend check); every rank raises RuntimeError if any rank fails."""
        backend = str(dist.get_backend(group))
        ranks = sorted(dist.get_process_group_ranks(group))
        algorithm = ALGORITHMS[config.algorithm]
        streams = config.streams
        if streams > MAX_LANES:
            _log.warn(f"streams {streams} is above acspeed's limit of {MAX_LANES} lanes (each lane costs process "
                      f"groups, on NCCL communicators with their own GPU buffers): using {MAX_LANES}",
                      once=("max-lanes", streams))
            streams = MAX_LANES
        compressor = compressor_for(config, algorithm, topology, params)
        key = cls.key_of(config, algorithm, compressor)
        lanes, error = build_lanes(streams, ranks, backend, topology, compressor.roles(algorithm),
                                   issuer.group_per_phase, device if issuer.uses_streams else None)
        try:
            failed = agree(group, device, error)
            if failed:
                raise RuntimeError(describe_failures(failed))
            dtypes = {p.dtype for p in params if p.requires_grad and p.is_floating_point()}
            wanted = compressor.wire_dtype
            ops = ("all_reduce",) if config.algorithm == "allreduce" else CHECKED_OPS
            collectives = Collectives.detect(lanes[0].group, dtypes | ({wanted} if wanted else set()), device, ops)
            # What the hook cannot build from anything else: an asynchronous all-reduce with a future of
            # the gradients' dtypes (some backends' Work has none), and hierarchical's reduce/broadcast.
            needed = ("all_reduce", "reduce", "broadcast") if algorithm.by_node else ("all_reduce",)
            missing = collectives.missing(needed, dtypes)
            if missing is not None:
                raise RuntimeError(f"the {backend} backend's asynchronous {missing}")
        except BaseException:
            close_lanes(lanes)
            raise
        if wanted is not None and not collectives.supports("all_reduce", wanted):
            _log.warn(f"the {backend} backend cannot all-reduce {config.compression} in this torch: "
                      "gradients are reduced uncompressed", once=("no-compression", backend, config.compression))
            compressor = Cast(None)
        emulated = collectives.emulated()
        if emulated and config.algorithm != "allreduce":
            _log.info(f"the {backend} backend lacks {', '.join(emulated)}: acspeed builds "
                      f"{'it' if len(emulated) == 1 else 'them'} from {' / '.join(collectives.built_from())}",
                      once=("emulated", backend, tuple(emulated)))
        return cls(key, lanes, collectives, compressor)


class HookState:
    """What the hook needs: the config, the lanes, the backend's collectives, the issuer, the
    compressors, the reusable buffers, an optional observer, the fallback counter, and the user's
    hook once they register one. One per DDP model."""

    def __init__(self, config: "CommConfig", lanes: List[Lane], collectives: Collectives, world_size: int,
                 compressor: Compressor, device: torch.device, issuer, strict: bool,
                 topology: Optional[Topology] = None, params: Optional[List[torch.nn.Parameter]] = None):
        self.config = config
        self.lanes = lanes
        self.collectives = collectives
        self.world_size = world_size
        self.compressor = compressor   # the config's (compressor.py)
        self.plain = compressor if isinstance(compressor, Cast) else Cast(None)  # buckets it passes over, re-sends
        self.device = device
        self.algorithm = ALGORITHMS[config.algorithm]
        self.issuer = issuer
        self.strict = strict
        self.observer = None
        self.user_hook = None          # (hook, state) registered by the user after construction
        self.nonfinite_fallbacks = 0       # buckets reduced uncompressed because the compressed sum was not finite
        self.left_to_finish = 0        # CPU: checked last buckets the step's last hook call left to their finish
        self.test_delays: Dict[int, float] = {}  # test-only seam: lane -> seconds slept before each collective
        self.scratch = Scratch()
        self.param_names: Dict[int, str] = {}  # id(parameter) -> its name in the DDP module (PowerSGD's keys)
        self.checking_nonfinite = False   # this step's compressed buckets are checked for NaN/Inf
        self._expected = 0             # the bucket index DDP must hand over next
        self._compressing = False      # this step's buckets are compressed (compressor.begin_step)
        self._fallback_entries: List[FallbackEntry] = []   # this step's checked buckets, in bucket order
        self._replacement = None       # (config, compressor, algorithm, wiring) taking over at the next bucket 0
        self._topology = topology      # what a replacement's compressor is built from
        self._params = params or []
        self._group = None             # the DDP model's process group (create)
        self._wirings: Dict[tuple, "_Wiring"] = {}  # the lanes to reuse for a config, by _Wiring.key_of
        self._built: List["_Wiring"] = []  # every wiring built (close releases them all)
        self.stepper = None            # acspeed.online's Stepper while it explores: a config due this step takes over at bucket 0
        self.registered = False        # the hook is registered on the DDP model's reducer (online tuning runs some windows without it)

    @property
    def powersgd(self) -> Optional[PowerSgd]:
        """Compression powersgd: the factors, error feedback and compute times (powersgd.py); else None."""
        state = self.compressor.state
        return state if isinstance(state, PowerSgd) else None

    @classmethod
    def create(cls, config: "CommConfig", group, params: List[torch.nn.Parameter]) -> "HookState":
        """Collective over the default group (new process groups) and over `group` (topology,
        agreement, the backend check). If any rank cannot build its part, every rank raises RuntimeError (none
        is left waiting) naming the ranks and their errors."""
        device = params[0].device if params else torch.device("cpu")
        issuer = issuer_for(device, str(dist.get_backend(group)))
        topology = Topology.discover(group, device) if config.algorithm_info.by_node else None
        wiring = _Wiring.build(config, group, params, issuer, topology, device)
        state = cls(config, wiring.lanes, wiring.collectives, dist.get_world_size(group), wiring.compressor, device,
                    issuer, _runtime.strict_or_off(), topology, params)
        state._group = group
        state._wirings[wiring.key] = wiring
        state._built.append(wiring)
        return state

    def replace_config(self, config: "CommConfig") -> None:
        """Hands the hook a new config (the seam for tuning inside a live job: whoever owns the step
        count calls it on every rank in the same step, as acspeed.online does at a window
        boundary). It takes over at the next step's bucket 0, never within a step. Local when lanes
        of the new config's algorithm, streams and lane slots were built already and checked its
        wire dtype (e.g. to none from fp16/bf16, PowerSGD's rank and start step, which start with
        fresh factors, or back to a config that ran before). Otherwise its lanes are built now, a
        collective (new process groups, agreement and the backend check, like create), so every rank must
        call it at the same point; RuntimeError as in create. DDP's own knobs (bucket_cap_mb, ...)
        are not the hook's."""
        algorithm = ALGORITHMS[config.algorithm]
        topology = self._topology
        if topology is None and config.algorithm_info.by_node:
            topology = Topology.discover(self._group, self.device)
        compressor = compressor_for(config, algorithm, topology, self._params)
        key = _Wiring.key_of(config, algorithm, compressor)
        wiring = self._wirings.get(key)
        if wiring is None or not wiring.checked(compressor.wire_dtype):
            wiring = _Wiring.build(config, self._group, self._params, self.issuer, topology, self.device)
            self._wirings[key] = wiring
            self._built.append(wiring)
            compressor = wiring.compressor
        elif compressor.wire_dtype is not None and not wiring.collectives.supports("all_reduce", compressor.wire_dtype):
            compressor = Cast(None)  # the backend lacks the compressed dtype: uncompressed, as create warned
        self._topology = topology
        self._replacement = (config, compressor, algorithm, wiring)

    def close(self) -> None:
        """Releases the lanes' process groups (every config's that ran) and the reusable buffers.
        Idempotent."""
        self.lanes = []
        built, self._built, self._wirings = self._built, [], {}
        for wiring in built:
            close_lanes(wiring.lanes)
        self.scratch.clear()

    # --- the hook ---------------------------------------------------------------------------

    def run(self, bucket) -> torch.futures.Future:
        if not self.lanes:
            raise RuntimeError("acspeed's comm hook was used after its lanes were released "
                               "(the DDP model was re-wrapped or closed)")
        index = bucket.index()
        self._check_order(index)
        if index == 0:
            self._begin_step()
        lanes = self.lanes
        flat = bucket.buffer()
        local = None
        if flat.requires_grad:  # backward(create_graph=True): reduce a detached alias (see _LocalGraph)
            local, flat = flat, flat.detach()
        lane = lanes[index % len(lanes)]
        result = torch.futures.Future(devices=[flat.device]) if flat.is_cuda else torch.futures.Future()
        with self.issuer.context(lane):
            job = self.compressor.job(self, index, bucket, flat, lane, result) if self._compressing else None
            if job is None:
                job = self.plain.plain_job(self, index, flat, lane, result, compress=True)
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

    def _begin_step(self) -> None:
        """Bucket 0: a replaced config takes over; is this step compressed, and checked for NaN/Inf?"""
        if self.stepper is not None:  # acspeed.online: at a window's first step, replaces the config
            self.stepper.at_bucket_zero(self)
        if self._replacement is not None:
            (self.config, self.compressor, self.algorithm, wiring), self._replacement = self._replacement, None
            if wiring.lanes is not self.lanes:
                self.lanes, self.collectives = wiring.lanes, wiring.collectives
                self.scratch.clear()  # another algorithm pads and packs otherwise
            self.plain = self.compressor if isinstance(self.compressor, Cast) else Cast(None)
        self._compressing = self.compressor.begin_step()
        self.checking_nonfinite = self._compressing and not scaler.in_use(self.device.type, decision.precision())

    def tracked_job(self, job: Job, entry: Optional[FallbackEntry]) -> Job:
        """The job, with its fallback entry (if any) tracked for the step's last hook call."""
        if entry is not None:
            entry.job = job
            self._fallback_entries.append(entry)
        return job

    def completed(self, index: int, flat: torch.Tensor) -> torch.Tensor:
        """The bucket's result is in place: tell the observer before DDP can see it."""
        observer = self.observer
        if observer is not None:
            observer.bucket_completed(index)
        return flat

    def _complete(self, entry: FallbackEntry) -> None:
        entry.unpack()
        entry.job.result.set_result(self.completed(entry.job.index, entry.flat))

    def _end_step(self, buckets: int) -> None:
        """The step's last hook call: issue what is still queued, settle the fallback, reset."""
        self._expected = 0
        self.issuer.advance(block=True)
        if self.checking_nonfinite:
            self._settle_fallbacks()
        self.compressor.end_step(self._compressing)
        self.scratch.keep_only(buckets)

    def _settle_fallbacks(self) -> None:
        """Waits for the step's checked buckets (their flags exist once their finish callbacks ran),
        reads the flags (CPU: unpacks the casts' reduced copies here, FallbackEntry.settle), completes the
        finite buckets still open and re-sends the others
        uncompressed, in bucket order: every rank holds the same reduced values, hence the same
        flags, so every rank issues the same re-sends."""
        entries, self._fallback_entries = self._fallback_entries, []
        if not entries:
            return
        resend = []
        if self.device.type == "cuda":
            for entry in entries:
                entry.job.finished.wait()  # the finish callback ran
            current = torch.cuda.current_stream(self.device)
            for entry in entries:
                current.wait_event(entry.ready)
            nonfinite = torch.stack([entry.flag for entry in entries]).tolist()  # the step's one host sync
            for entry, bad in zip(entries, nonfinite):
                if bad:
                    resend.append(entry)
                    continue
                with self.issuer.context(entry.job.lane):  # finite: unpack on the lane's CUDA stream after the flag
                    torch.cuda.current_stream(self.device).wait_event(entry.ready)
                    self._complete(entry)
        else:
            # The step's last bucket is left to its own finish while its reduction is in flight, so that this
            # call returns and DDP's finalize_backward copies the settled buckets into the gradients during
            # the step's last transfer, as it does under torch's fp16_compress_hook (that copy, ~40 MB for
            # resnet18, was otherwise done after it). Only when no earlier bucket is re-sent and a re-send is
            # one collective (a one-phase algorithm), so the finish can issue it whole, after every re-send of
            # this step, as every rank does.
            last = entries[-1] if len(self.algorithm.roles) == 1 else None
            for entry in entries:
                if entry is last and not resend and entry.leave(self._settle_left):
                    self.left_to_finish += 1
                    break
                entry.job.finished.wait()  # the finish callback ran: the compressed reduction is done
                if entry.settle():
                    resend.append(entry)
                elif not entry.job.result.done():
                    entry.job.result.set_result(self.completed(entry.job.index, entry.flat))
        for entry in resend:
            self._resend(entry)
        self.issuer.advance(block=True)

    def _settle_left(self, entry: FallbackEntry) -> None:
        """A bucket the step's last hook call left to its finish (on the backend's thread, once its
        reduction is done): unpacked if finite and completed, else re-sent uncompressed, as there."""
        if entry.settle():
            self._resend(entry)
        else:
            entry.job.result.set_result(self.completed(entry.job.index, entry.flat))

    def _resend(self, entry: FallbackEntry) -> None:
        """Reduces a bucket whose compressed sum held NaN/Inf again, uncompressed, into its future."""
        self.nonfinite_fallbacks += 1
        _log.warn(f"{self.config.compression} compression gave NaN/Inf in bucket {entry.job.index} "
                  f"(overflow or a non-finite gradient): that bucket was reduced uncompressed "
                  f"(fallback #{self.nonfinite_fallbacks}; later ones are counted in HookState.nonfinite_fallbacks)",
                  once=("nonfinite-fallback", id(self)))
        lane = entry.job.lane
        with self.issuer.context(lane):
            self.issuer.start(self.plain.plain_job(self, entry.job.index, entry.flat, lane, entry.job.result,
                                                   compress=False))


def comm_hook(state: HookState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """acspeed's DDP comm hook. Once the user registers their own hook, it runs theirs."""
    if state.user_hook is not None:
        hook, user_state = state.user_hook
        return hook(user_state, bucket)
    return state.run(bucket)
