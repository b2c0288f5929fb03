"""What must be in the environment before NCCL's first communicator, set when the job builds its
first process group rather than at `import acspeed`: NCCL reads its variables once per process, at
its first communicator, and torch creates that communicator no earlier than the first process group
(with `device_id`, inside init_process_group: nccl2 and the classic group connect eagerly then).
Doing it here keeps `import acspeed` free of the C++ runtime, also on CUDA machines (the 50 ms
budget over `import torch`; bench/runtime/RESULTS.md section 1).

torch builds every process group through distributed_c10d._new_process_group_helper, a module
global it looks up at each call: init_process_group (however the script imported it; device meshes
too, torch.distributed.device_mesh holds its own reference to init_process_group) and new_group.
Wrapping that name catches the first group whichever way it comes. At that first call, before
torch's own code runs: ranks sharing GPUs get their NCCL identities (share_gpus) and the instance
knobs their variables (instance_knobs: NCCL's sockets); then the wrapper puts torch's function back,
so later groups pay nothing."""
import functools


def prepare() -> None:
    """Sets what NCCL must read at its first communicator; each part leaves the job's own variables
    alone and asks the runtime only where it applies (no setting, no CUDA: nothing loaded)."""
    from . import instance_knobs, share_gpus  # noqa: PLC0415 - at the first process group only
    share_gpus.prepare_process()
    instance_knobs.prepare_process()


def install() -> None:
    """Idempotent; nothing where torch has no torch.distributed."""
    import torch.distributed as dist  # loaded by `import torch` already

    if not dist.is_available():
        return
    from torch.distributed import distributed_c10d as c10d  # noqa: PLC0415 - loaded with torch.distributed

    original = c10d._new_process_group_helper
    if hasattr(original, "_acspeed_original"):
        return

    @functools.wraps(original)
    def _new_process_group_helper(*args, **kwargs):
        c10d._new_process_group_helper = original  # once: a problem below must not come back at every group
        prepare()
        return original(*args, **kwargs)

    _new_process_group_helper._acspeed_original = original
    c10d._new_process_group_helper = _new_process_group_helper
