"""The in-place patch of torch.nn.parallel.DistributedDataParallel (a subclass would miss scripts that
imported the name before acspeed). Arguments are bound by the constructor's own signature, so any
torch >= 2.1 works whatever parameters it added (init_sync, device_mesh, bucket_cap_mb_list, ...).
GradScaler.scale is wrapped too, to notice a scaler in use (acspeed.scaler)."""
import functools
import inspect


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
        from . import hooks  # noqa: PLC0415
        acspeed_state = hooks.state_of(self)
        if acspeed_state is None or acspeed_state.user_hook is not None:
            return original_register(self, state, hook)
        hooks.yield_to_user(self, acspeed_state, state, hook)
        return None

    original_builtin = DDP._register_builtin_comm_hook

    @functools.wraps(original_builtin)
    def _register_builtin_comm_hook(self, comm_hook_type):
        from . import hooks  # noqa: PLC0415
        acspeed_state = hooks.state_of(self)
        if acspeed_state is None or acspeed_state.user_hook is not None:
            return original_builtin(self, comm_hook_type)
        # DDP's one hook slot holds acspeed's hook: run the Python twin of the built-in instead.
        hook = hooks.python_builtin_hook(comm_hook_type)
        hooks.yield_to_user(self, acspeed_state, self.process_group, hook)
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
