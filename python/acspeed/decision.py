"""Which config a DDP model gets: rank 0 of the model's process group looks it up through the C++
runtime (ACSPEED_DISABLE, ACSPEED_CONFIG, the store, the ACSPEED_* pins) and broadcasts the decision
to every rank before any of them builds hooks or groups, so all ranks apply the same config."""
import dataclasses
from typing import TYPE_CHECKING, List, Optional

import torch
import torch.distributed as dist

from . import _runtime, share_gpus
from .versions import job_versions

if TYPE_CHECKING:
    from ._core import CommConfig

_precision: Optional[str] = None


def set_precision(precision: Optional[str]) -> None:
    """ValueError for a name that is not one of the runtime's precisions. Without the runtime the
    name is kept unchecked: the lookup then reports the missing runtime (one warning, DDP defaults)."""
    if precision is not None:
        try:
            accepted = _runtime.core().PRECISIONS
        except _runtime.RuntimeUnavailable:
            accepted = None
        if accepted is not None and precision not in accepted:
            raise ValueError(f"precision '{precision}' is not one of {', '.join(accepted)} (or None)")
    global _precision
    _precision = precision


def precision() -> str:
    """The training precision of the lookup key: acspeed.configure(precision=...), else
    ACSPEED_PRECISION, else "" (any precision matches)."""
    return _precision if _precision is not None else (_runtime.setting_string("ACSPEED_PRECISION") or "")


@dataclasses.dataclass
class Decision:
    """Pickled for the broadcast: the config travels as its JSON (CommConfig's pickle)."""
    source: str                      # resolve()'s sources, plus "error" for a problem on the Python side
    config: Optional["CommConfig"]   # the validated config to apply; None leaves DDP untouched
    message: str                     # the one line rank 0 logs
    applied: bool = False
    warnings: List[str] = dataclasses.field(default_factory=list)
    online: Optional[dict] = None    # tune this DDP model online: rank 0's payload (acspeed.online.offer)

    def line(self) -> str:
        """The job's line: the message, as "no change (message)" when nothing is applied and the job
        is not tuned online (ACSPEED_DISABLE says so itself)."""
        if self.applied or self.online is not None or self.source == "disabled":
            return self.message
        return f"no change ({self.message})"


def model_signature(module: torch.nn.Module) -> str:
    """The signature decisions are keyed by: parameter names, shapes and dtypes in registration order."""
    params = [(name, list(p.shape), str(p.dtype).replace("torch.", "")) for name, p in module.named_parameters()]
    return _runtime.core().model_signature(params)


def fingerprint() -> dict:
    """Not cached: cheap, and ACSPEED_INSTANCE_TYPE may change between DDP constructions."""
    return _runtime.core().fingerprint(torch.__version__)


def disabled_locally() -> Optional[Decision]:
    """ACSPEED_DISABLE is read by every rank itself, so a disabled job runs no extra collective."""
    if _runtime.setting_bool("ACSPEED_DISABLE"):
        return Decision(source="disabled", config=None,
                        message="acspeed is disabled (ACSPEED_DISABLE=1): DDP runs untouched")
    return None


def lookup(module: torch.nn.Module, world_size: int) -> Decision:
    """Rank 0's lookup. Never raises: a problem (a bad NNODES or ACSPEED_SHARE_GPUS included: the
    runtime counts the nodes and tells shared GPUs by the rules the tuner keys with) is an "error"
    decision with DDP defaults."""
    try:
        core = _runtime.core()
        versions = job_versions()
        shared = share_gpus.job_shares_gpus(world_size, core.node_count(world_size))
        result = core.resolve(fingerprint()["instance_type"], model_signature(module), precision(),
                              world_size, None, versions["torch"], versions["nccl"], gpus_shared=shared)
    except (RuntimeError, ValueError) as error:
        return Decision(source="error", config=None, message=str(error))
    config = result["comm_config"] if result["source"] not in ("disabled", "error") else None
    return Decision(source=result["source"], config=config, message=result["message"],
                    applied=bool(result["applied"]), warnings=list(result["warnings"]))


def share(decision: Optional[Decision], group, device: torch.device) -> Decision:
    """Collective over `group`: every rank returns the decision of the group's rank 0. A rank that
    died (or a broken group) fails it with the backend's error, which is raised as a RuntimeError
    saying which broadcast failed: DDP could not build its model over that group either."""
    payload = [decision]
    source = dist.get_global_rank(group, 0)
    # NCCL moves the object through the model's GPU (not whatever device is current); gloo uses the CPU.
    through = device if device.type == "cuda" and "nccl" in str(dist.get_backend(group)) else None
    try:
        dist.broadcast_object_list(payload, src=source, group=group, device=through)
    except RuntimeError as error:  # gloo: "Connection closed by peer", a timeout...
        rank = dist.get_rank()
        role = f"rank {rank} could not send it" if rank == source else f"rank {rank} did not receive it"
        raise RuntimeError(f"acspeed: the broadcast of the DDP config from rank {source} to every rank of the "
                           f"model's process group failed ({role}): a rank of this job died or stopped "
                           f"answering: {error}") from error
    return payload[0]


def forced(config, what: str) -> Decision:
    """A config given by the caller (the tuner's trial worker): a CommConfig, or its JSON text
    (validated here: ValueError names a bad value; unknown keys become warnings); not looked up."""
    warnings = []
    if isinstance(config, str):
        config, warnings = _runtime.core().CommConfig.from_json(config)
    return Decision(source="forced", config=config, applied=True, warnings=list(warnings),
                    message=f"applied {config.describe()} ({what})")
