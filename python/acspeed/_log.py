"""acspeed's messages inside a training job: one logger, rank 0 speaks, each key at most once.

Lines go to stderr as `acspeed: ...` through the standard `logging` module (logger "acspeed"), so a job
can silence or redirect them like any other library's."""
import logging
import sys
import threading

_logger = logging.getLogger("acspeed")
_said: set = set()
_lock = threading.Lock()


_configured = False


def _ready() -> logging.Logger:
    """Our stderr handler, added once; INFO unless the application set the logger's level itself."""
    global _configured
    if not _configured:
        _configured = True
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("acspeed: %(message)s"))
        _logger.addHandler(handler)
        if _logger.level == logging.NOTSET:
            _logger.setLevel(logging.INFO)
        _logger.propagate = False
    return _logger


def is_rank0() -> bool:
    """Rank 0 of the default group, or a process with no process group yet."""
    import torch.distributed as dist
    return not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0


def _first_time(key) -> bool:
    if key is None:
        return True
    with _lock:
        if key in _said:
            return False
        _said.add(key)
        return True


class StrictError(SystemExit):
    """ACSPEED_STRICT=1 made one of acspeed's own validation errors (a bad ACSPEED_CONFIG, an unknown
    name) end the job: rank 0 has logged the one line saying so (strict_error); every rank exits with
    status 1 and, being a SystemExit, without a traceback (torchrun still reports the failed ranks).
    str() is that line."""

    def __init__(self, reason: str):
        super().__init__(1)
        self.reason = reason
        self.line = f"raised (ACSPEED_STRICT=1): {reason}"  # what rank 0 logs

    def __str__(self) -> str:
        return f"acspeed: {self.line}"


def strict_error(reason: str) -> StrictError:
    """The StrictError to raise for `reason`, logged first on rank 0 (every rank raises it)."""
    error = StrictError(reason)
    if is_rank0():
        _ready().error(error.line)
    return error


def info(message: str, once=None) -> None:
    """Logs on rank 0; with `once`, only the first message for that key."""
    if is_rank0() and _first_time(once):
        _ready().info(message)


def warn(message: str, once=None) -> None:
    if is_rank0() and _first_time(once):
        _ready().warning(message)
