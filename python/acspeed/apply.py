"""Applying a config to a DDP model: the patched DDP constructor and the trial worker's entry.

    import acspeed                       # patches DDP.__init__ in place (see acspeed._patch)
    ddp = DDP(model, ...)                # looks up, broadcasts and applies the config, logs one line
    ddp = acspeed.apply.wrap(model, config, device_ids=[rank])   # a given config (trials)

Precedence: what the caller passed to DDP explicitly (bucket_cap_mb, gradient_as_bucket_view, ...)
wins over the config; static_graph and broadcast_buffers are never changed.
"""
import contextlib
import gc
import threading
import weakref
from typing import TYPE_CHECKING, Optional

import torch
import torch.distributed as dist

from . import _log, _patch, _runtime, decision, nccl

if TYPE_CHECKING:
    from ._core import CommConfig

_MIB = 1024 * 1024
_forced = threading.local()
_wrapped_states: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def _first_bucket(mb: Optional[float]):
    """DDP reads torch.distributed._DEFAULT_FIRST_BUCKET_BYTES at construction."""
    if mb is None or not hasattr(dist, "_DEFAULT_FIRST_BUCKET_BYTES"):
        yield
        return
    saved = dist._DEFAULT_FIRST_BUCKET_BYTES
    dist._DEFAULT_FIRST_BUCKET_BYTES = int(mb * _MIB)
    try:
        yield
    finally:
        dist._DEFAULT_FIRST_BUCKET_BYTES = saved


def _ddp_group(arguments: dict):
    group = arguments.get("process_group")
    mesh = arguments.get("device_mesh")
    if group is None and mesh is not None:
        group = mesh.get_group()
    return group if group is not None else dist.distributed_c10d._get_default_group()


def _set_knobs(arguments: dict, parameters, config: "CommConfig", notes: list) -> Optional[float]:
    """Puts the config's constructor knobs into DDP's bound arguments unless the caller chose them;
    returns the first-bucket size (MiB) to apply during construction, or None."""
    explicit = set(arguments)
    user_caps = {name for name in ("bucket_cap_mb", "bucket_cap_mb_list") if arguments.get(name) is not None}
    if config.bucket_cap_mb is not None:
        if user_caps:
            notes.append("kept your " + ", ".join(f"{name}={arguments[name]}" for name in sorted(user_caps)))
        else:
            arguments["bucket_cap_mb"] = config.bucket_cap_mb
    if config.gradient_as_bucket_view is not None and "gradient_as_bucket_view" in parameters:
        if "gradient_as_bucket_view" in explicit:
            if arguments["gradient_as_bucket_view"] != config.gradient_as_bucket_view:
                notes.append(f"kept your gradient_as_bucket_view={arguments['gradient_as_bucket_view']}")
        else:
            arguments["gradient_as_bucket_view"] = config.gradient_as_bucket_view
    return _first_bucket_mb(arguments, parameters, config, notes)


def _first_bucket_mb(arguments: dict, parameters, config: "CommConfig", notes: list) -> Optional[float]:
    """The first-bucket size to apply, or None. Older torch reads it from a module constant at
    construction; newer torch ignores that constant once bucket_cap_mb is given, and there a
    per-bucket list [first, rest] says the same thing (the last limit repeats)."""
    first = config.first_bucket_mb
    if first is None:
        return None
    if arguments.get("bucket_cap_mb_list") is not None:
        notes.append("first_bucket_mb not applied: you passed bucket_cap_mb_list")
        return None
    cap = arguments.get("bucket_cap_mb")
    cap_mb = cap
    if cap_mb is None:  # torch's own constant where it has one, else the runtime's (config.h)
        cap_mb = getattr(torch.nn.parallel.distributed, "_DEFAULT_BUCKET_CAP_MB", _runtime.core().DDP_DEFAULT_BUCKET_MB)
    if first > cap_mb:  # DDP (and torch.compile's DDPOptimizer) want the first bucket <= the others
        notes.append(f"first_bucket_mb {first:g} not applied: larger than the bucket cap {cap_mb:g} MiB")
        return None
    if (cap is not None and "bucket_cap_mb_list" in parameters
            and hasattr(torch.nn.parallel.distributed, "_BucketCapacityConfig")):
        arguments["bucket_cap_mb_list"] = [first, cap]
    return first


def _hook_blocker(ddp, group) -> Optional[str]:
    """Why acspeed's comm hook cannot run on this DDP model, or None."""
    if getattr(ddp, "_comm_hooks", None):
        return ("DDP registered a comm hook of its own at construction (mixed_precision), so acspeed "
                "applied the bucket settings only")
    if any(getattr(m, "sparse", False) for m in ddp.module.modules()
           if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag))):
        return "the model has sparse gradients (sparse embeddings), so acspeed applied the bucket settings only"
    if getattr(ddp, "skip_all_reduce_unused_params", False):
        return ("skip_all_reduce_unused_params=True lets DDP skip buckets without calling a comm hook, which "
                "acspeed's per-step bucket order needs, so it applied the bucket settings only")
    if getattr(ddp, "_use_python_reducer", False):
        return ("compiled autograd with optimize_ddp='python_reducer' bypasses DDP comm hooks, so "
                "acspeed applied the bucket settings only")
    if group.size() != dist.get_world_size():
        return ("this DDP model uses a process group of part of the job; acspeed's lanes need every "
                "rank, so it applied the bucket settings only")
    return None


def _report(found: decision.Decision, notes: list, trouble: bool = False) -> None:
    """One line on rank 0; a warning when something went wrong (`trouble`: the hook's setup failed)."""
    line = "; ".join([found.line()] + found.warnings + notes)
    if trouble or found.source == "error" or found.warnings:
        _log.warn(line)
    else:
        _log.info(line)


def _decide(module, group, device, arguments: dict) -> decision.Decision:
    given = getattr(_forced, "decision", None)
    if given is not None:
        return given
    try:
        off = decision.disabled_locally()
    except (ValueError, _runtime.RuntimeUnavailable) as error:
        off = decision.Decision(source="error", config=None, message=str(error))
    if off is not None:
        return off
    mine = None
    if group.rank() == 0:
        mine = decision.lookup(module, group.size())
        if group.size() >= 2:
            from . import online  # noqa: PLC0415 - only where a job may tune online
            mine = online.offer(mine, group, arguments, device)
    return decision.share(mine, group, device)


def construct(original, signature, ddp, args, kwargs) -> None:
    """The body of the patched DistributedDataParallel.__init__."""
    if not (dist.is_available() and dist.is_initialized()):
        original(ddp, *args, **kwargs)  # DDP raises its own error
        return
    bound = signature.bind(ddp, *args, **kwargs)
    arguments = bound.arguments
    module = arguments["module"]
    group = _ddp_group(arguments)
    first = next(iter(module.parameters()), None)
    device = first.device if first is not None else torch.device("cpu")
    found = _decide(module, group, device, arguments)
    if found.source == "error" and _runtime.strict_or_off():
        raise _log.strict_error(found.message)
    config = found.config
    if found.online is not None:  # tuned online: it starts from the job's own DDP (acspeed.online)
        from . import online  # noqa: PLC0415
        config = online.baseline(found.online)
        found.message = f"{found.message}; {online.start_line(found.online)}"
    if config is None:
        _report(found, [])
        original(ddp, *args, **kwargs)
        return
    notes: list = []
    trouble = False
    del arguments["self"]
    first_bucket_mb = _set_knobs(arguments, signature.parameters, config, notes)
    with _first_bucket(first_bucket_mb):
        original(ddp, **arguments)
    if "nccl" in str(dist.get_backend(group)):  # "nccl", or a mixed "cpu:gloo,cuda:nccl"
        nccl.publish_rules(config.to_json())
    if config.needs_comm_hook() or found.online is not None:
        blocker = _hook_blocker(ddp, group)
        if blocker is not None:
            notes.append(blocker + ("; not tuned online" if found.online is not None else ""))
        else:
            try:
                # Tuned online: the hook state is built, and registered only when the job's own DDP
                # needs it (a pinned compression): DDP's own reduction otherwise (acspeed.online).
                register = found.online is None or online.runs_hooked(found.online["held"], config)
                state = _patch.install_hook(ddp, config, group, register)
                if found.online is not None:
                    online.begin(ddp, state, found.online, group, device, signature.parameters)
            except (RuntimeError, ValueError) as error:
                if _runtime.strict_or_off():
                    raise RuntimeError(f"acspeed (ACSPEED_STRICT=1): could not set up acspeed's comm hook ({error})") \
                        from error
                notes.append(f"could not set up acspeed's comm hook ({error}): DDP's built-in allreduce is used")
                trouble = True
    _report(found, notes, trouble)


@contextlib.contextmanager
def _forcing(found: decision.Decision):
    _forced.decision = found
    try:
        yield
    finally:
        _forced.decision = None


def release(module: torch.nn.Module) -> None:
    """Closes the lanes (process groups, buffers) of the last DDP that wrap() built around `module`.
    Drop your own reference to that DDP object too: its reducer's autograd hooks live as long as it."""
    state = _wrapped_states.pop(module, None)
    if state is not None:
        state.close()
    gc.collect()


def wrap(module: torch.nn.Module, config, *, hooked: bool = False, **ddp_kwargs):
    """(Re)wraps `module` in DDP with the given config (a CommConfig, or its JSON text), inside live
    workers: every rank calls it with the same config, in the same order. The previous wrap's lanes
    are released first. JSON text is validated (ValueError naming the bad value); the caller's
    explicit DDP arguments win over the config.
    ``hooked``: register acspeed's comm hook even when the config needs none (DDP's defaults then run
    acspeed's plain allreduce: the same buckets and bytes, with per-bucket times for a probe)."""
    from torch.nn.parallel import DistributedDataParallel  # noqa: PLC0415 - patched class

    release(module)
    found = decision.forced(config, "config given to acspeed.apply.wrap")
    with _forcing(found):
        ddp = DistributedDataParallel(module, **ddp_kwargs)
    state = _patch.state_of(ddp)
    if state is None and hooked:
        state = _patch.install_hook(ddp, found.config, ddp.process_group)
    if state is not None:
        _wrapped_states[module] = state
    return ddp
