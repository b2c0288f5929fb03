"""The in-place patch of torch.nn.parallel.DistributedDataParallel (a subclass would miss scripts that
imported the name before acspeed). Arguments are bound by the constructor's own signature, so any
torch >= 2.1 works whatever parameters it added (init_sync, device_mesh, bucket_cap_mb_list, ...).
GradScaler.scale is wrapped too, to notice a scaler in use (acspeed.scaler).

Here too: which DDP model holds which acspeed hook state (`state_of`, `install_hook`), and the hand-over
of DDP's one hook slot when the user registers a hook of their own, or a built-in one, after
acspeed did (`yield_to_user`). The hook itself is the engine's (acspeed.engine), loaded at the
first install_hook, never at `import acspeed`."""
import functools
import inspect
import weakref
from typing import TYPE_CHECKING, Callable, Optional

from . import _log

if TYPE_CHECKING:
    from ._core import CommConfig
    from .engine.state import HookState


def install() -> None:
    """Idempotent."""
    from torch.nn.parallel import DistributedDataParallel as DDP  # loaded by `import torch` already

    if hasattr(DDP.__init__, "_acspeed_original"):
        return
    original_init = DDP.__init__
    signature = inspect.signature(original_init)

    @functools.wraps(original_init)
    def __init__(self, *args, **kwargs):
        from . import apply  # noqa: PLC0415 - keeps `import acspeed` cheap
        apply.construct(original_init, signature, self, args, kwargs)

    original_register = DDP.register_comm_hook

    @functools.wraps(original_register)
    def register_comm_hook(self, state, hook):
        acspeed_state = state_of(self)
        if acspeed_state is None or acspeed_state.user_hook is not None:
            return original_register(self, state, hook)
        yield_to_user(self, acspeed_state, state, hook, lambda: original_register(self, state, hook))
        return None

    original_builtin = DDP._register_builtin_comm_hook

    @functools.wraps(original_builtin)
    def _register_builtin_comm_hook(self, comm_hook_type):
        acspeed_state = state_of(self)
        if acspeed_state is None or acspeed_state.user_hook is not None:
            return original_builtin(self, comm_hook_type)
        # DDP's one hook slot holds acspeed's hook: run the Python twin of the built-in instead.
        hook = python_builtin_hook(comm_hook_type)
        yield_to_user(self, acspeed_state, self.process_group, hook, lambda: original_builtin(self, comm_hook_type))
        return None

    _patch_grad_scaler()
    __init__._acspeed_original = original_init
    register_comm_hook._acspeed_original = original_register
    _register_builtin_comm_hook._acspeed_original = original_builtin
    DDP.__init__ = __init__
    DDP.register_comm_hook = register_comm_hook
    DDP._register_builtin_comm_hook = _register_builtin_comm_hook


def _patch_grad_scaler() -> None:
    """Counts losses scaled by an enabled GradScaler (acspeed.scaler); changes nothing. The base
    class is torch.amp.GradScaler (torch >= 2.3; torch.cuda.amp's subclasses it) or, before,
    torch.cuda.amp.GradScaler."""
    import torch  # noqa: PLC0415 - loaded already

    GradScaler = getattr(torch.amp, "GradScaler", None) or torch.cuda.amp.GradScaler

    original_scale = GradScaler.scale

    @functools.wraps(original_scale)
    def scale(self, outputs):
        if self.is_enabled():
            from . import scaler  # noqa: PLC0415
            scaler.note_scaled_loss()
        return original_scale(self, outputs)

    scale._acspeed_original = original_scale
    GradScaler.scale = scale


# DDP model -> its HookState. Not an attribute of the model: DDP pickles its __dict__ (deepcopy,
# torch.save), and a copy must hold no process group, lock or CUDA stream of acspeed's (README.md,
# "DDP's own code paths").
_STATES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def state_of(ddp) -> Optional["HookState"]:
    """The acspeed hook state of a DDP model, or None when acspeed registered no hook on it (also
    on a copy of one: copies reduce with DDP's built-in allreduce). While online tuning explores,
    the state stays with the model also in windows whose reducer has no hook of acspeed's
    (HookState.registered says which)."""
    return _STATES.get(ddp)


def attach_observer(ddp, observer) -> None:
    """Attaches a BucketObserver (acspeed.probes) to a DDP model's acspeed hook; None detaches.
    Raises ValueError when acspeed registered no hook on that model (DDP defaults need none)."""
    state = state_of(ddp)
    if state is None:
        raise ValueError("this DDP model has no acspeed comm hook (its config keeps DDP's built-in "
                         "allreduce, or acspeed stepped aside), so there is nothing to observe")
    state.observer = observer


def install_hook(ddp, config: "CommConfig", group, register: bool = True) -> "HookState":
    """Builds the hook state for `ddp` and registers the hook (collective). The lanes are released
    when the DDP object is garbage-collected, or earlier by HookState.close(). `register` False:
    the state only (online tuning registers the hook when a window's config needs it)."""
    from .engine.state import HookState  # noqa: PLC0415 - keeps `import acspeed` cheap
    state = HookState.create(config, group, [p for p in ddp.module.parameters() if p.requires_grad])
    state.param_names = {id(p): name for name, p in ddp.module.named_parameters()}
    try:
        if register:
            register_hook(ddp, state)
    except BaseException:
        state.close()
        raise
    _STATES[ddp] = state
    weakref.finalize(ddp, state.close)
    return state


def register_hook(ddp, state: "HookState") -> None:
    """Registers acspeed's hook with `state` on the DDP model's reducer (a reducer takes one hook:
    a rebuilt reducer (acspeed.reducer) has none yet)."""
    from .engine.state import comm_hook  # noqa: PLC0415
    original_register_comm_hook()(ddp, state, comm_hook)
    state.registered = True
    # DDP lists registered hooks in _comm_hooks (pickled with the model; run per parameter by its Python
    # reducer): acspeed's hook is not the user's, so it stays out of that list, as DDP's built-in one does.
    if getattr(ddp, "_comm_hooks", None):
        ddp._comm_hooks = [(hook, hook_state) for hook, hook_state in ddp._comm_hooks if hook is not comm_hook]


def forget(ddp) -> None:
    """acspeed's hook left the DDP model (its reducer was rebuilt without it): state_of says None."""
    _STATES.pop(ddp, None)


def original_register_comm_hook():
    """DDP's own register_comm_hook, also after acspeed patched it."""
    from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: PLC0415 - loaded already
    method = DDP.register_comm_hook
    return getattr(method, "_acspeed_original", method)


def yield_to_user(ddp, state: "HookState", user_state, user_hook, register: Callable[[], None]) -> None:
    """The user registered their own comm hook after acspeed did: theirs runs from now on (DDP keeps
    one hook slot, so acspeed's hook hands every bucket to theirs; where the reducer holds no hook of
    acspeed's, in an online tuning window that runs DDP's own reduction, `register` puts theirs on
    it) and acspeed's lanes are released."""
    name = getattr(user_hook, "__qualname__", repr(user_hook))
    if not state.registered:
        register()
    else:
        check = getattr(ddp, "_check_comm_hook", None)
        if check is not None:
            check(user_hook)
        if getattr(ddp, "logger", None) is not None:
            ddp.logger._set_comm_hook_name(name)
        if hasattr(ddp, "_comm_hooks"):
            ddp._comm_hooks = [(user_hook, user_state)]
    state.user_hook = (user_hook, user_state)
    if state.stepper is not None:  # online tuning (acspeed.online) ends with it: nothing left to switch
        state.stepper.stop(f"your comm hook {name} took over")
    state.close()
    _log.info(f"your comm hook {name} replaces acspeed's ({state.config.algorithm}, "
              f"{state.config.streams} stream(s), compression {state.config.compression})",
              once=("user-hook", name))


def python_builtin_hook(comm_hook_type):
    """torch's Python hook doing what a built-in C++ comm hook type does (same numerics)."""
    import torch.distributed as dist  # noqa: PLC0415 - loaded already
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks  # noqa: PLC0415
    twins = {dist.BuiltinCommHookType.ALLREDUCE: default_hooks.allreduce_hook,
             dist.BuiltinCommHookType.FP16_COMPRESS: default_hooks.fp16_compress_hook}
    if comm_hook_type not in twins:
        raise ValueError(f"built-in comm hook {comm_hook_type} is not one of {', '.join(map(str, twins))}")
    return twins[comm_hook_type]
