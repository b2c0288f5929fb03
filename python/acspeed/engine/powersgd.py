"""PowerSGD compression (Vogels et al., 2019) inside acspeed's comm hook: per-bucket low-rank
factors with error feedback and warm start, issued through the hook engine's ordered phases
(issue.py), so every rank issues the same collectives on the same groups in the same order.

Per bucket, from step `powersgd_start_step` on (earlier steps, and buckets holding only 1-D
gradients, take the algorithm's plain path):
  * each gradient of two or more dimensions is a matrix M (first dimension x the rest) plus its
    error from the previous step (error feedback); rank r = min(powersgd_rank, rows, columns),
    clamped per tensor (said once);
  * P = M Q with the tensor's Q from the previous step (warm start; the first Q is seeded by the
    parameter's name, the same on every rank); all-reduce P; orthonormalise P's columns (orthonormalize); Q = M^T P; all-reduce Q;
    Q /= W; the averaged gradient is P Q^T; the error is M - P Q^T (torch's PowerSGD math);
  * 1-D gradients (biases, norms) are packed into one buffer, divided by W and reduced exactly by
    the config's algorithm (allreduce or reduce_scatter).
Phases of a bucket (one collective each, lane slot i runs phase i):
  allreduce / reduce_scatter: the algorithm's phases for the 1-D buffer, then P, then Q;
  hierarchical: reduce of the whole bucket to the node's leader (intra), then among the leaders of
    the nodes (inter) the 1-D buffer, P and Q, then the leader's broadcast (intra). Only the
    inter-node step is compressed; with one node there is none, and the plain path runs. The L
    leaders factor as L ranks of their own whose gradients are their node's sum times L/W (W: all
    ranks): Q is divided by L, so P Q^T approximates the sum over all ranks / W, and the leaders'
    residuals add up to what the approximation left out of that sum, as in the flat case (dividing Q
    by W instead would leave (1 - L/W) of every step's sum in the residuals, and the gradients
    applied would grow towards W/L times the average).
The plain path of a PowerSGD config places the algorithm's phases in the same slots (plain_phases),
so that a bucket passes through every phase in order whichever path it takes.

The factors are held transposed (P^T: r x rows, Q^T: r x columns, in the buffers and the state):
P^T = Q^T M^T and Q^T = P^T M are the same products, and a BLAS computes the skinny ones with the
short side first several times faster on the CPU (MKL, one thread, a 512x4608 gradient at rank 4:
M Q 2.9 ms, Q^T M^T 0.5 ms; M^T P 3.7 ms, P^T M 0.8 ms). A checkpoint keeps Q as columns x r.

Nothing here issues a collective from a future callback: the P all-reduce is issued in the hook
call, the Q step (orthonormalisation, Q = M^T P, the all-reduce) in the issuer's next phase (the
hook call of a later bucket, or the step's last one); only the decompression (P Q^T, the error)
runs in the callback DDP waits on.

Non-finite gradients: a NaN/Inf in any rank's gradient makes the reduced P, Q or 1-D sums
non-finite (on every rank alike: they are the results of the same all-reduces). Such a bucket's
verdict is bad, and its factors and residuals are not updated: the tensors keep the Q and the error
of their last finite step, so one bad step cannot poison every later one. What reaches the
gradients is the hook's choice (state.py): the decompressed, non-finite result (a GradScaler in use
sees it, skips the step and backs the scale off), or, with the fallback on, the untouched raw gradients,
which the step's last hook call reduces again uncompressed. The verdict is a 0-d tensor: on CUDA the
state update selects with it on the device (no host sync); on the CPU it is read directly.

State to keep for exact resumption (state_dict / load_state_dict, per DDP model and per rank): each
gradient matrix's Q (warm start) and error-feedback residual, by parameter name, and the count of
synchronised steps (the start step). `compute_s` holds PowerSGD's own compute time (packing, matmuls, orthonormalisation) per
step: on CUDA it is the host time to enqueue that work, not the kernels' time.
"""
import dataclasses
import threading
import time
import zlib
from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist

from .. import _log
from .fallback import FallbackEntry, nonfinite
from .issue import Job

STATE_VERSION = 1
# Each matrix's M, P^T and Q^T start at a multiple of this many elements (64 bytes in fp32) in their
# bucket's buffers (the gaps stay zero): the CPU's vectorised products and norms round differently at
# other alignments, and a tensor's result must not depend on which bucket, at which offset, it
# travels in.
ALIGNMENT = 16


@dataclasses.dataclass
class _Matrix:
    name: str     # the parameter's name in the DDP module (its state's key)
    offset: int   # in the bucket's flat buffer
    rows: int
    cols: int
    rank: int
    m_at: int     # offsets in the bucket's M, P and Q buffers
    p_at: int
    q_at: int


def matrix_sides(shape) -> Optional[Tuple[int, int]]:
    """(rows, columns) of a gradient PowerSGD factors: two or more dimensions and not empty, seen as
    the first dimension x the rest; None for the 1-D (and 0-d, and empty) ones it sends whole."""
    numel = 1
    for side in shape:
        numel *= side
    if len(shape) < 2 or numel == 0:
        return None
    return shape[0], numel // shape[0]


@dataclasses.dataclass
class Layout:
    """Where a bucket's gradients lie, from their names and shapes (the same on every rank)."""
    vectors: List[Tuple[int, int, int]]   # (offset in bucket, numel, offset in the 1-D buffer)
    matrices: List[_Matrix]
    numel: int                            # the gradients laid end to end
    vector_numel: int
    m_numel: int                          # the buffers' sizes (aligned, see ALIGNMENT)
    p_numel: int
    q_numel: int

    @classmethod
    def of(cls, named_shapes, rank: int) -> "Layout":
        vectors, matrices = [], []
        offset = vec = m_at = p_at = q_at = 0
        for name, shape in named_shapes:
            numel = 1
            for side in shape:
                numel *= side
            sides = matrix_sides(shape)
            if sides is not None:
                rows, cols = sides
                r = min(rank, rows, cols)
                if r < rank:
                    _log.info(f"powersgd_rank {rank} is larger than the smaller side of a {rows}x{cols} gradient "
                              f"matrix ({name}): rank {r} is used for it (and for any other such matrix)",
                              once=("powersgd-clamp", rank))
                m_at, p_at, q_at = (-(-at // ALIGNMENT) * ALIGNMENT for at in (m_at, p_at, q_at))
                matrices.append(_Matrix(name, offset, rows, cols, r, m_at, p_at, q_at))
                m_at, p_at, q_at = m_at + numel, p_at + rows * r, q_at + cols * r
            else:
                vectors.append((offset, numel, vec))
                vec += numel
            offset += numel
        return cls(vectors, matrices, offset, vec, m_at, p_at, q_at)


def initial_q(name: str, cols: int, rank: int) -> torch.Tensor:
    """A tensor's first Q: standard normal, float32, seeded by the parameter's name (the same on
    every rank, whatever bucket the tensor is in)."""
    generator = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    return torch.randn(cols, rank, generator=generator, dtype=torch.float32)


class TensorState:
    """One gradient matrix's warm-start Q (held as Q^T, r x columns) and error-feedback residual,
    kept across steps."""

    def __init__(self, matrix: _Matrix, dtype: torch.dtype, device: torch.device):
        self.qt = initial_q(matrix.name, matrix.cols, matrix.rank).t().contiguous().to(dtype=dtype, device=device)
        self.error = torch.zeros(matrix.rows, matrix.cols, dtype=dtype, device=device)


def orthonormalize(pt: torch.Tensor) -> None:
    """The columns of P, which are the rows of pt (P^T), made orthonormal in place as Gram-Schmidt
    makes them: column i keeps its direction once the earlier ones are taken out, and a zero column
    stays zero. Above rank 2 through a Householder QR with R's diagonal made non-negative (the same
    factors, rounded more stably; only the columns after a zero one may differ, orthogonal to one more
    direction), as torch's powerSGD_hook does in fp32: one LAPACK call where Gram-Schmidt issues five
    small operations per column (resnet18's 21 matrices at rank 16 on one core: 1.1 against 13.4 ms);
    up to rank 2 the loop is as short."""
    if pt.shape[0] > 2:
        q, r = torch.linalg.qr(pt.t())
        pt.copy_((q * torch.sign(torch.diagonal(r))).t())
        return
    tiny = torch.finfo(pt.dtype).tiny ** 0.5
    for i in range(pt.shape[0]):
        row = pt[i:i + 1]
        row.div_(torch.linalg.vector_norm(row).clamp_min(tiny))
        if i + 1 < pt.shape[0]:
            rest = pt[i + 1:]
            rest.sub_((rest @ row.t()) * row)


def work_dtype(dtype: torch.dtype) -> torch.dtype:
    """The factors of half-precision gradients are computed in fp32."""
    return torch.promote_types(dtype, torch.float32)


class PowerSgd:
    """The PowerSGD state of one DDP model on one rank. The factors and residuals are kept per
    parameter (by name), not per bucket: DDP rebuilds its buckets after the first step, and a
    checkpoint outlives a bucket layout; the sums of P and Q are elementwise, so which bucket a
    tensor travels in changes nothing in the result."""

    def __init__(self, rank: int, start_step: int, nodes: int):
        self.rank = rank
        self.start_step = start_step
        self.nodes = nodes                 # hierarchical: nodes in the DDP group (1: nothing to compress)
        self.step = 0                      # synchronised steps completed
        self.tensors: Dict[str, TensorState] = {}
        self.compressed_buckets = 0        # buckets reduced compressed, over the model's life
        self.compute_s: List[float] = []   # PowerSGD's own compute time of each compressed step
        self._step_compute = 0.0
        self._lock = threading.Lock()      # the callback thread adds its decompression time too
        self._loaded: Dict[str, dict] = {}

    def active(self) -> bool:
        return self.step >= self.start_step

    def timed(self, seconds: float) -> None:
        with self._lock:
            self._step_compute += seconds

    def end_step(self, compressed: bool) -> None:
        """The step's last hook call (its decompressions may still run: they add to the next step's
        figure at worst, never lose time)."""
        with self._lock:
            if compressed:
                self.compute_s.append(self._step_compute)
            self._step_compute = 0.0
        self.step += 1

    def tensor(self, matrix: _Matrix, dtype: torch.dtype, device: torch.device) -> TensorState:
        state = self.tensors.get(matrix.name)
        if state is None:
            state = TensorState(matrix, dtype, device)
            loaded = self._loaded.pop(matrix.name, None)
            if loaded is not None:
                q_shape = (matrix.cols, matrix.rank)
                if tuple(loaded["q"].shape) != q_shape or tuple(loaded["error"].shape) != tuple(state.error.shape):
                    raise ValueError(f"acspeed.load_state_dict: {matrix.name} had Q {tuple(loaded['q'].shape)} and "
                                     f"error {tuple(loaded['error'].shape)} when saved, {q_shape} and "
                                     f"{tuple(state.error.shape)} now (another model)")
                state.qt.copy_(loaded["q"].t())
                state.error.copy_(loaded["error"])
            self.tensors[matrix.name] = state
        return state

    def state_dict(self) -> dict:
        tensors = {name: {"q": t.qt.detach().t().cpu().contiguous(), "error": t.error.detach().cpu().clone()}
                   for name, t in self.tensors.items()}
        tensors.update({name: value for name, value in self._loaded.items() if name not in tensors})
        return {"version": STATE_VERSION, "compression": "powersgd", "powersgd_rank": self.rank,
                "powersgd_start_step": self.start_step, "step": self.step, "tensors": tensors}

    def load_state_dict(self, saved: dict) -> None:
        if not isinstance(saved, dict) or saved.get("version") != STATE_VERSION or "tensors" not in saved:
            raise ValueError(f"acspeed.load_state_dict: not a PowerSGD state of version {STATE_VERSION}")
        if saved.get("powersgd_rank") != self.rank:
            raise ValueError(f"acspeed.load_state_dict: the state was saved with powersgd_rank "
                             f"{saved.get('powersgd_rank')}, this model's config has {self.rank}")
        self.step = int(saved["step"])
        self.tensors = {}
        self._loaded = dict(saved["tensors"])


def roles(algorithm) -> Tuple[str, ...]:
    """The lane slots a PowerSGD config needs with `algorithm`."""
    if algorithm.by_node:
        return ("intra", "inter", "inter", "inter", "intra")
    return tuple(algorithm.roles) + ("all", "all")


def plain_phases(algorithm, phases: list) -> list:
    """The algorithm's own phases placed in a PowerSGD config's slots (see roles)."""
    if algorithm.by_node:
        return phases[:2] + [None, None] + phases[2:]
    return phases + [None, None]


Phases = List[Optional[Callable[[object], object]]]


Decompress = Callable[[bool], Optional[torch.Tensor]]


@dataclasses.dataclass
class PlanOptions:
    """One compressed bucket, as plan() needs it."""
    psgd: PowerSgd                 # the model's factors and residuals on this rank
    index: int                     # the bucket's index
    flat: torch.Tensor             # the bucket: this rank's undivided gradients
    layout: Layout                 # where its gradients lie (Layout.of)
    lane: object                   # the lane it goes to (lanes.py)
    collectives: object            # the backend's collectives (collectives.py)
    algorithm: object              # the config's algorithm (algorithms.py)
    world_size: int                # ranks in the DDP group
    scratch: Callable[..., torch.Tensor]  # (bucket index, role, numel, dtype) -> a buffer reused across steps
    my_rank: int                   # this rank's global rank
    leader: int                    # hierarchical only: the global rank that takes part in the inter-node
                                   # step for this rank's node (the flat algorithms: my_rank)


def plan(opts: PlanOptions) -> Tuple[Phases, Decompress]:
    """The phases of one compressed bucket and its finish, decompress(keep_raw) (the decompression
    into `flat` and the state's update, see "Non-finite gradients" above), which returns the
    bucket's verdict: a 0-d bool tensor, true when the reduced factors or 1-D sums hold NaN/Inf
    (None on a rank that computed nothing, and on a second call). After finish `flat` holds the
    averaged approximation, or, when the verdict is bad and keep_raw is true, still the raw
    gradients."""
    psgd, index, flat, layout, lane = opts.psgd, opts.index, opts.flat, opts.layout, opts.lane
    coll, algorithm, world_size, scratch_get = opts.collectives, opts.algorithm, opts.world_size, opts.scratch
    my_rank, leader = opts.my_rank, opts.leader
    hierarchical = algorithm.by_node
    # The ranks that factor (see "hierarchical" above): every rank, or the nodes' leaders.
    factoring = psgd.nodes if hierarchical else world_size
    work = work_dtype(flat.dtype)
    leading = my_rank == leader
    m_all = scratch_get(index, "psgd-m", layout.m_numel, work)
    p_all = scratch_get(index, "psgd-p", layout.p_numel, work)
    q_all = scratch_get(index, "psgd-q", layout.q_numel, work)
    if hierarchical:
        vec = scratch_get(index, "psgd-vec", layout.vector_numel, work)
    else:
        divisor = algorithm.divisor(coll, lane, work)
        vec = scratch_get(index, "psgd-vec", -(-layout.vector_numel // divisor) * divisor, work)
    done = []

    def views(matrix: _Matrix):
        """(gradient in the bucket, M, P^T, this bucket's Q^T, the tensor's state)."""
        rows, cols, r = matrix.rows, matrix.cols, matrix.rank
        return (flat[matrix.offset:matrix.offset + rows * cols].view(rows, cols),
                m_all[matrix.m_at:matrix.m_at + rows * cols].view(rows, cols),
                p_all[matrix.p_at:matrix.p_at + rows * r].view(r, rows),
                q_all[matrix.q_at:matrix.q_at + cols * r].view(r, cols),
                psgd.tensor(matrix, work, flat.device))

    def compress() -> None:
        """Packs the 1-D buffer; M = gradient + error; P^T = Q^T M^T (this rank's part)."""
        start = time.perf_counter()
        for offset, numel, at in layout.vectors:
            vec[at:at + numel].copy_(flat[offset:offset + numel])
        vec[:layout.vector_numel].div_(world_size)
        for matrix in layout.matrices:
            grad, m, pt, _, state = views(matrix)
            # hierarchical: a node's sum, as the gradient of one of `factoring` ranks (flat: alpha 1)
            torch.add(state.error, grad, alpha=factoring / world_size, out=m)
            torch.mm(state.qt, m.t(), out=pt)
        psgd.timed(time.perf_counter() - start)

    def q_step(group):
        start = time.perf_counter()
        for matrix in layout.matrices:
            _, m, pt, qt, _ = views(matrix)
            orthonormalize(pt)
            torch.mm(pt, m, out=qt)
        psgd.timed(time.perf_counter() - start)
        return coll.all_reduce(q_all, group)

    def decompress(keep_raw: bool) -> Optional[torch.Tensor]:
        """flat = the 1-D averages and P Q^T; error = M - P Q^T; the tensor keeps Q; all of it only
        as the verdict allows. Runs once, on the ranks that computed factors."""
        if done or not leading:
            return None
        done.append(True)
        start = time.perf_counter()
        q_all.div_(factoring)
        bad = nonfinite(p_all) | nonfinite(q_all)
        if layout.vector_numel:
            bad |= nonfinite(vec[:layout.vector_numel])
        on_device = flat.is_cuda  # select on the device; on the CPU read the verdict (no sync there)
        bad_now = False if on_device else bool(bad)
        for offset, numel, at in layout.vectors:
            part = flat[offset:offset + numel]
            if on_device and keep_raw:
                part.copy_(torch.where(bad, part, vec[at:at + numel]))
            elif not (bad_now and keep_raw):
                part.copy_(vec[at:at + numel])
        for matrix in layout.matrices:
            grad, m, pt, qt, state = views(matrix)
            if on_device:
                approx = pt.t() @ qt
                state.qt.copy_(torch.where(bad, state.qt, qt))
                state.error.copy_(torch.where(bad, state.error, m - approx))
                grad.copy_(torch.where(bad, grad, approx) if keep_raw else approx)
                continue
            if bad_now and keep_raw:
                continue
            if grad.dtype == work:  # the approximation P Q^T straight into the bucket
                approx = torch.mm(pt.t(), qt, out=grad)
            else:  # half-precision gradients: the factors' product in fp32, then cast
                approx = pt.t() @ qt
                grad.copy_(approx)
            if not bad_now:
                state.qt.copy_(qt)
                torch.sub(m, approx, out=state.error)
        psgd.timed(time.perf_counter() - start)
        return bad

    def vector_phase(group):
        return coll.all_reduce(vec, group) if layout.vector_numel else None

    if not hierarchical:
        compress()
        vector = algorithm.phases(coll, lane, vec, lambda numel: scratch_get(index, "psgd-shard", numel, work)) \
            if layout.vector_numel else [None] * len(algorithm.roles)
        phases = vector + [lambda group: coll.all_reduce(p_all, group), q_step]
        return phases, decompress

    def first_inter(group):  # the node's sum is on the leader now
        compress()
        return vector_phase(group)

    def broadcast(group):  # no raw gradients to keep: the intra-node reduce consumed them
        decompress(False)
        return coll.broadcast(flat, leader, group)

    def reduce_to_leader(group):
        return coll.reduce(flat, leader, group)

    if leading:
        phases = [reduce_to_leader, first_inter, lambda group: coll.all_reduce(p_all, group), q_step, broadcast]
    else:
        phases = [reduce_to_leader, None, None, None, broadcast]
    return phases, decompress


class LowRank:
    """PowerSGD as the hook's compressor (compressor.py, wire form low_rank): from the start step, a
    bucket holding gradient matrices is reduced as factors through plan(); every other bucket takes
    the plain path, in this compressor's lane slots (roles, plain_phases)."""

    wire_dtype = None

    def __init__(self, psgd: PowerSgd):
        self.state = psgd

    @classmethod
    def create(cls, config, algorithm, topology, params) -> "LowRank":
        if not any(p.dim() >= 2 for p in params):
            _log.info("compression powersgd: every gradient of this model is 1-D (biases, norms), so there is "
                      "nothing to factor: they are reduced uncompressed",
                      once=("powersgd-all-1d", id(params[0]) if params else 0))
        return cls(PowerSgd(config.powersgd_rank, config.powersgd_start_step,
                            len(topology.nodes) if topology is not None else 1))

    def roles(self, algorithm) -> Tuple[str, ...]:
        return roles(algorithm)

    def place(self, algorithm, phases: list) -> list:
        return plain_phases(algorithm, phases)

    def begin_step(self) -> bool:
        return self.state.active()

    def end_step(self, compressed: bool) -> None:
        self.state.end_step(compressed)

    def job(self, hook, index: int, bucket, flat: torch.Tensor, lane, result) -> Optional[Job]:
        """The bucket's compressed reduction, or None when it takes the plain path: no gradient of
        two or more dimensions in it, or (hierarchical) no inter-node step to compress."""
        psgd, algorithm = self.state, hook.algorithm
        if algorithm.by_node and psgd.nodes < 2:
            return None
        layout = Layout.of([(hook.param_names.get(id(p), f"bucket{index}.{k}"), tuple(p.shape))
                            for k, p in enumerate(bucket.parameters())], psgd.rank)
        if not layout.matrices:
            return None
        if layout.numel != flat.numel():
            _log.warn(f"PowerSGD: bucket {index}'s buffer ({flat.numel()} elements) is not its gradients laid end "
                      "to end: it is reduced uncompressed", once=("powersgd-layout", id(hook), index))
            return None
        me = dist.get_rank()
        leader = me
        if algorithm.by_node:
            if lane.leader is not None:
                leader = lane.leader
            elif lane.intra is not None:
                leader = dist.get_global_rank(lane.intra, 0)

        def scratch(bucket_index, role, numel, dtype):
            return hook.scratch.get(bucket_index, role, numel, dtype, flat.device)

        phases, decompress = plan(PlanOptions(psgd=psgd, index=index, flat=flat, layout=layout, lane=lane,
                                              collectives=hook.collectives, algorithm=algorithm,
                                              world_size=hook.world_size, scratch=scratch, my_rank=me, leader=leader))
        psgd.compressed_buckets += 1
        # The non-finite fallback (no GradScaler): a bucket whose factors are not finite keeps its raw gradients and is
        # reduced again uncompressed. Not for hierarchical: its intra-node reduce consumed the raw gradients.
        entry = FallbackEntry(job=None, flat=flat, unpack=lambda: None) \
            if hook.checking_nonfinite and not algorithm.by_node else None

        def finish() -> Optional[torch.Tensor]:
            bad = decompress(entry is not None)
            if entry is not None and entry.hold(bad):
                return None
            return hook.completed(index, flat)

        return hook.tracked_job(Job(index=index, lane=lane, phases=phases, finish=finish, result=result,
                                    delay_s=hook.test_delays.get(lane.index, 0.0)), entry)
