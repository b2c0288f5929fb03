"""Which config a DDP model gets: rank 0 of the model's process group looks it up through the C++
runtime (ACSPEED_DISABLE, ACSPEED_CONFIG, the store, the ACSPEED_* pins) and broadcasts the decision
to every rank before any of them builds hooks or groups, so all ranks apply the same config."""
import dataclasses
import json
import os
from typing import List, Optional

import torch
import torch.distributed as dist

from . import _runtime
from .versions import job_versions

PRECISIONS = ("amp", "fp32", "fp16", "bf16")
_precision: Optional[str] = None


def set_precision(precision: Optional[str]) -> None:
    if precision is not None and precision not in PRECISIONS:
        raise ValueError(f"precision '{precision}' is not one of {', '.join(PRECISIONS)} (or None)")
    global _precision
    _precision = precision


def precision() -> str:
    """The training precision of the lookup key: acspeed.configure(precision=...), else
    ACSPEED_PRECISION, else "" (any precision matches)."""
    return _precision if _precision is not None else (_runtime.setting_string("ACSPEED_PRECISION") or "")


@dataclasses.dataclass
class Decision:
    source: str                 # resolve()'s sources, plus "error" for a problem on the Python side
    config_json: Optional[str]  # canonical config JSON to apply; None leaves DDP untouched
    message: str                # the one line rank 0 logs
    applied: bool = False
    warnings: List[str] = dataclasses.field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "Decision":
        return cls(**json.loads(text))


def model_signature(module: torch.nn.Module) -> str:
    """The signature decisions are keyed by: parameter names, shapes and dtypes in registration order."""
    params = [(name, list(p.shape), str(p.dtype).replace("torch.", "")) for name, p in module.named_parameters()]
    return _runtime.core().model_signature(params)


def _fingerprint() -> dict:
    """Not cached: cheap, and ACSPEED_INSTANCE_TYPE may change between DDP constructions."""
    return _runtime.core().fingerprint(torch.__version__)


def node_count(world_size: int) -> int:
    """Machines in the job: NNODES or torchrun's GROUP_WORLD_SIZE, else world size / LOCAL_WORLD_SIZE."""
    for name in ("NNODES", "GROUP_WORLD_SIZE"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    local = os.environ.get("LOCAL_WORLD_SIZE", "")
    if local.isdigit() and int(local) > 0:
        return max(1, world_size // int(local))
    return 1


def disabled_locally() -> Optional[Decision]:
    """ACSPEED_DISABLE is read by every rank itself, so a disabled job runs no extra collective."""
    if _runtime.setting_bool("ACSPEED_DISABLE"):
        return Decision(source="disabled", config_json=None,
                        message="acspeed is disabled (ACSPEED_DISABLE=1): DDP runs untouched")
    return None


def lookup(module: torch.nn.Module, world_size: int) -> Decision:
    """Rank 0's lookup. Never raises: a problem is an "error" decision with DDP defaults."""
    try:
        core = _runtime.core()
        versions = job_versions()
        result = core.resolve(_fingerprint()["instance_type"], model_signature(module), precision(),
                              world_size, node_count(world_size), versions["torch"], versions["nccl"])
    except (RuntimeError, ValueError) as error:
        return Decision(source="error", config_json=None, message=f"{error}; using DDP defaults")
    config = result["config"] if result["source"] not in ("disabled", "error") else None
    return Decision(source=result["source"], config_json=config, message=result["message"],
                    applied=bool(result["applied"]), warnings=list(result["warnings"]))


def share(decision: Optional[Decision], group, device: torch.device) -> Decision:
    """Collective over `group`: every rank returns the decision of the group's rank 0."""
    payload = [decision.to_json() if decision is not None else None]
    source = dist.get_global_rank(group, 0)
    # NCCL moves the object through the model's GPU (not whatever device is current); gloo uses the CPU.
    through = device if device.type == "cuda" and "nccl" in str(dist.get_backend(group)) else None
    dist.broadcast_object_list(payload, src=source, group=group, device=through)
    return Decision.from_json(payload[0])


def forced(config_json: str, what: str) -> Decision:
    """A config given by the caller (the tuner's trial worker): validated, not looked up."""
    canonical, warnings = _runtime.core().config_from_json(config_json)
    return Decision(source="forced", config_json=canonical, applied=True, warnings=list(warnings),
                    message=f"applied {_runtime.core().config_describe(canonical)} ({what})")
