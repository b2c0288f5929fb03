"""The knobs of the instance, not of the model: NCCL's sockets over TCP (NCCL_SOCKET_NTHREADS x
NCCL_NSOCKS_PERTHREAD), which NCCL reads once per process and which a communicator uses as soon as it
connects, at init_process_group when `device_id` is passed: before acspeed knows the model. So
they are set when the job builds its first process group, before torch builds it (first_group.py;
not at `import acspeed`, which loads nothing of the runtime), from what the runtime's resolve_instance_knobs
(db/include/acspeed/resolve.h) finds: ACSPEED_NCCL_SOCKETS, ACSPEED_CONFIG, or the store's active
decisions for this instance type and node count (several that disagree set nothing, said once).

Only where torch can use CUDA (NCCL carries the job). A job that set either variable itself keeps
its own (a pin, said in one line), also one set after `import acspeed` but before the first process
group. Where torch cannot use CUDA this module asks nothing of the runtime."""
import os
from typing import Dict, MutableMapping

VARIABLES = ("NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD")


def prepare_process(environ: MutableMapping[str, str] = os.environ) -> Dict[str, str]:
    """At the job's first process group, before any communicator (first_group.py): sets the instance knobs' variables and returns
    those it set ({} when none). A problem (no runtime, a bad NNODES, an unreadable store) is one
    warning and nothing set, an error under ACSPEED_STRICT=1."""
    import torch  # noqa: PLC0415 - loaded by `import acspeed` already

    if not torch.cuda.is_available():
        return {}
    from . import _log, _runtime, share_gpus  # noqa: PLC0415
    from .versions import job_versions  # noqa: PLC0415

    speaks = environ.get("RANK", "0") == "0"  # no process group yet: rank 0 by the launcher's variable
    try:
        core = _runtime.core()
        world_size = int(environ.get("WORLD_SIZE") or 1)
        nnodes = core.node_count(world_size)
        versions = job_versions()
        knobs = core.resolve_instance_knobs(world_size=world_size, nnodes=nnodes,
                                            gpus_shared=share_gpus.job_shares_gpus(world_size, nnodes),
                                            torch_version=versions["torch"], nccl_version=versions["nccl"])
    except (ValueError, RuntimeError) as error:  # RuntimeUnavailable is a RuntimeError
        knobs = {"source": "error", "message": f"{error}; NCCL sockets left to NCCL", "environment": []}
    if knobs["source"] == "error" and _runtime.strict_or_off():
        raise RuntimeError(f"acspeed (ACSPEED_STRICT=1): {knobs['message']}")
    if knobs["source"] in ("error", "disagree"):
        if speaks:
            _log.warn(knobs["message"], once="instance-knobs")
        return {}
    wanted = dict(knobs["environment"])
    if not wanted:
        return {}
    users = {name: environ[name] for name in VARIABLES if environ.get(name, "") != ""}
    if users == wanted:
        return {}  # already so: the tuner's workers get both at launch
    if users:
        if speaks:
            own = ", ".join(f"{name}={value}" for name, value in sorted(users.items()))
            _log.info(f"{knobs['message']}: not set, the job set {own} itself (a pin: NCCL uses the job's)",
                      once="instance-knobs")
        return {}
    environ.update(wanted)
    if speaks:
        what = ", ".join(f"{name}={value}" for name, value in wanted.items())
        _log.info(f"{knobs['message']}: set {what} before any communicator", once="instance-knobs")
    return wanted
