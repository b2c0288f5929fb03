"""Ranks sharing GPUs, opt-in (ACSPEED_SHARE_GPUS=1, or `acspeed-tune --share-gpus`): a node runs more
ranks than it has GPUs, as on a machine with one GPU where a decision still needs two ranks.

Under the setting, when this node's ranks outnumber its GPUs (the rule is the runtime's,
runtime/include/acspeed/gpu_sharing.h, so the tuner and `import acspeed` agree):
  * a rank's device is its local rank modulo the device count (device_index);
  * before any NCCL communicator exists, each rank gets its own NCCL host identity, so NCCL accepts
    two ranks on one device (it refuses a duplicate GPU within one host) and connects them through
    its socket transport, plus the other settings that needs (nccl_environment); a variable the user
    set is left alone;
  * the lookup matches only decisions tuned with GPUs shared, and those never apply to a job whose
    ranks each have their own GPU (the store's key holds gpus_shared).
Without the setting, or with a GPU per rank, nothing here changes anything. This module imports
neither torch nor the runtime until the setting is present, so `import acspeed` stays cheap."""
import os
import socket
from typing import Dict, Mapping, Optional

SETTING = "ACSPEED_SHARE_GPUS"


def requested(environ: Mapping[str, str] = os.environ) -> bool:
    """The setting, parsed strictly by the runtime's registry (ValueError names a bad value); the
    runtime is loaded only when the variable is set."""
    if environ.get(SETTING, "") == "":
        return False
    from . import _runtime  # noqa: PLC0415 - only when the setting is present
    return _runtime.setting_bool(SETTING)


def shared(asked: bool, ranks_per_node: int, gpus: int) -> bool:
    """Whether ranks share GPUs: asked for, and more ranks on a node than it has GPUs (runtime's rule)."""
    from . import _runtime  # noqa: PLC0415
    return bool(_runtime.core().gpus_shared(asked, ranks_per_node, gpus))


def device_index(local_rank: int, gpus: int) -> int:
    """The GPU of a rank: its local rank modulo the node's GPU count."""
    if gpus < 1:
        raise ValueError(f"device_index needs at least one GPU, got {gpus}")
    return local_rank % gpus


def nccl_environment(rank: int, nnodes: int, hostname: str, environ: Mapping[str, str]) -> Dict[str, str]:
    """The NCCL variables a rank sharing a GPU needs, minus those set in `environ` (the user's win):
    a host identity of its own (NCCL_HOSTID: host name and global rank, unique in the job), no
    InfiniBand or NVLink SHARP (NCCL_IB_DISABLE=1, NCCL_NVLS_ENABLE=0: the ranks are no separate hosts
    really), and on a single node the loopback interface for the socket transport
    (NCCL_SOCKET_IFNAME=lo; across nodes NCCL keeps choosing its interface)."""
    wanted = {"NCCL_HOSTID": f"{hostname}-acspeed-rank{rank}", "NCCL_IB_DISABLE": "1", "NCCL_NVLS_ENABLE": "0"}
    if nnodes == 1:
        wanted["NCCL_SOCKET_IFNAME"] = "lo"
    return {name: value for name, value in wanted.items() if environ.get(name, "") == ""}


def _ranks_per_node(environ: Mapping[str, str]) -> Optional[int]:
    value = environ.get("LOCAL_WORLD_SIZE", "")
    return int(value) if value.isdigit() else None


def prepare_process(environ=os.environ) -> bool:
    """At the job's first process group (first_group.py; the trial worker's too), before any
    communicator: under the setting, when this node's ranks (LOCAL_WORLD_SIZE) outnumber its GPUs,
    sets this rank's NCCL variables (nccl_environment) and returns True; otherwise changes nothing and returns False.
    ACSPEED_DISABLE=1 turns this off with the rest of acspeed. A bad value of either setting (or no
    runtime) is one warning and no sharing, an error under ACSPEED_STRICT=1."""
    if environ.get(SETTING, "") == "":
        return False
    from . import _log, _runtime  # noqa: PLC0415
    try:
        if not requested(environ) or _runtime.setting_bool("ACSPEED_DISABLE"):
            return False
    except (ValueError, _runtime.RuntimeUnavailable) as error:
        if _runtime.strict_or_off():
            raise
        _log.warn(f"{error}: GPUs are not shared", once="share-gpus-setting")
        return False
    import torch  # noqa: PLC0415 - loaded by `import acspeed` already
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    ranks = _ranks_per_node(environ)
    if ranks is None or not shared(True, ranks, gpus):
        return False
    rank = int(environ.get("RANK", "0"))
    nnodes = _runtime.core().node_count(int(environ.get("WORLD_SIZE", ranks)))
    added = nccl_environment(rank, nnodes, socket.gethostname(), environ)
    environ.update(added)
    if rank == 0:
        _log.info(f"{SETTING}=1: {ranks} ranks per node share {gpus} GPU(s) (device = local rank mod {gpus}); "
                  f"each rank gets its own NCCL host identity"
                  f"{' (set: ' + ', '.join(sorted(added)) + ')' if added else ''}", once="share-gpus")
    return True


def job_shares_gpus(world_size: int, nnodes: int) -> bool:
    """For the lookup key: whether this job's ranks share GPUs (the setting, and more ranks per node
    than the node's GPUs)."""
    if not requested():
        return False
    import torch  # noqa: PLC0415
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return shared(True, max(1, world_size // max(1, nnodes)), gpus)


def device_for(local_rank: int) -> int:
    """The CUDA device index of a rank with local rank `local_rank`: modulo the device count under
    the setting, else the local rank itself (as before)."""
    if not requested():
        return local_rank
    import torch  # noqa: PLC0415
    return device_index(local_rank, torch.cuda.device_count())
