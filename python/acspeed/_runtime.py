"""Access to the C++ runtime (`acspeed._core`, built by CMake into this folder), imported lazily so
`import acspeed` stays cheap, plus the typed settings acspeed's Python side reads through it."""
import functools

from . import _log


class RuntimeUnavailable(RuntimeError):
    """The compiled runtime module is missing or does not load."""


@functools.lru_cache(maxsize=None)
def core():
    try:
        from . import _core  # noqa: PLC0415 - lazy on purpose
    except ImportError as error:
        raise RuntimeUnavailable(
            f"acspeed's C++ runtime (acspeed._core) is not built or does not load ({error}); "
            "install it with `pip install .`, or build the checkout with scripts/setup.sh") from error
    return _core


def setting_bool(name: str) -> bool:
    """Strict: ValueError naming the variable on a bad value."""
    return bool(core().setting_bool(name))


def setting_string(name: str):
    return core().setting_string(name)


def strict() -> bool:
    """ACSPEED_STRICT=1: problems in a training job raise instead of warning. A malformed value is
    itself an error, whatever mode was meant."""
    return setting_bool("ACSPEED_STRICT")


def strict_or_off() -> bool:
    """strict(), for callers that must not fail on its account: a missing runtime or a malformed
    value reads as off (the malformed value with one warning)."""
    try:
        return strict()
    except RuntimeUnavailable:
        return False  # the problem being reported is that very runtime; it is in the warning already
    except ValueError as error:
        _log.warn(f"{error}: treated as ACSPEED_STRICT=0", once="bad-strict")
        return False
