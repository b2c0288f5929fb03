"""Access to the C++ runtime (`acspeed._core`, built by CMake into this folder), imported lazily so
`import acspeed` stays cheap, plus the typed settings acspeed's Python side reads through it."""
import functools


class RuntimeUnavailable(RuntimeError):
    """The compiled runtime module is missing or does not load."""


@functools.lru_cache(maxsize=None)
def core():
    try:
        from . import _core  # noqa: PLC0415 - lazy on purpose
    except ImportError as error:
        raise RuntimeUnavailable(
            f"acspeed's C++ runtime (acspeed._core) is not built or does not load ({error}); "
            "build it with `cmake -S . -B build -G Ninja && ninja -C build`") from error
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
