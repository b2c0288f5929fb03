"""The NCCL tuner plugin (libnccl-tuner-acspeed.so, built into this folder on GPU builds) and the
rules it applies.

At import, NCCL_TUNER_PLUGIN is pointed at the plugin unless the user set it. At DDP construction
the config is written to a file named by ACSPEED_NCCL_RULES, which communicators created afterwards
read; communicators created earlier (the decision broadcast already made one) get the rules through
the plugin's exported setter `int acspeed_nccl_tuner_set_rules(const char* config_json)`. The file
is this process's own (named by its pid) and removed when the process exits."""
import atexit
import ctypes
import functools
import os
import pathlib
import tempfile

from . import _log

PLUGIN_NAME = "libnccl-tuner-acspeed.so"
SETTER = "acspeed_nccl_tuner_set_rules"


def plugin_path() -> pathlib.Path:
    return pathlib.Path(__file__).resolve().parent / PLUGIN_NAME


def export_plugin(path: pathlib.Path = None) -> None:
    """Sets NCCL_TUNER_PLUGIN to the plugin when it exists and the user did not choose one."""
    path = path or plugin_path()
    if os.environ.get("NCCL_TUNER_PLUGIN", "") == "" and path.is_file():
        os.environ["NCCL_TUNER_PLUGIN"] = str(path)


def plugin_active(path: pathlib.Path) -> bool:
    """Our plugin exists and NCCL was told to load it (by us or by the user)."""
    chosen = os.environ.get("NCCL_TUNER_PLUGIN", "")
    return path.is_file() and chosen != "" and os.path.realpath(chosen) == os.path.realpath(path)


@functools.lru_cache(maxsize=None)
def _setter(path: str):
    # The same file NCCL dlopen()ed, so this is the same library instance and the same rules.
    return getattr(ctypes.CDLL(path), SETTER)


def _remove(rules_file: pathlib.Path) -> None:
    try:
        rules_file.unlink()
    except OSError:  # removed by someone else, or /tmp cleaned meanwhile
        pass


def publish_rules(config_json: str, path: pathlib.Path = None) -> None:
    """Makes `config_json`'s NCCL rules the plugin's rules, for communicators created later
    (ACSPEED_NCCL_RULES file) and earlier (the plugin's setter). A rules file the user named
    themselves (ACSPEED_NCCL_RULES set before acspeed wrote one) is left alone."""
    path = path or plugin_path()
    rules_file = pathlib.Path(tempfile.gettempdir()) / f"acspeed-nccl-rules-{os.getpid()}.json"
    if os.environ.get("ACSPEED_NCCL_RULES", "") not in ("", str(rules_file)):
        _log.info(f"ACSPEED_NCCL_RULES={os.environ['ACSPEED_NCCL_RULES']} set by the user: "
                  "acspeed leaves the NCCL rules to that file", once="user-nccl-rules")
        return
    if not rules_file.exists():
        atexit.register(_remove, rules_file)
    rules_file.write_text(config_json)
    os.environ["ACSPEED_NCCL_RULES"] = str(rules_file)
    if not plugin_active(path):
        return
    setter = _setter(str(path))
    setter.argtypes = [ctypes.c_char_p]
    setter.restype = ctypes.c_int
    status = setter(config_json.encode())
    if status != 0:
        _log.warn(f"the NCCL tuner plugin refused the rules ({SETTER} returned {status}): "
                  "NCCL keeps its own choices", once=("nccl-setter", status))
