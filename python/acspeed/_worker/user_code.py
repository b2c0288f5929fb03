"""The user's object that `--model` or `--data` names: `pkg.module:name`, imported from the folder
acspeed-tune was started in (then PYTHONPATH), or `path/to/file.py:name`, loaded from that file (a
relative path is taken from that folder, on every node: the tuner passes it as --start-dir). Errors
are the caller's usage error type, naming the folder and what was found."""
import importlib
import importlib.util
import os
import sys

import torch

_STARTED_IN = "the folder acspeed-tune was started in"


def describe(value, inside: bool = True) -> str:
    """What a value is, for an error message: `a tensor (4, 8) torch.float32`, `a Module (Linear)`,
    `a tuple of 2 (Linear, int)` (`inside` False: `a tuple`), `a str`."""
    if isinstance(value, torch.Tensor):
        return f"a tensor {tuple(value.shape)} {value.dtype}"
    if isinstance(value, torch.nn.Module):
        return f"a Module ({type(value).__name__})"
    if isinstance(value, (tuple, list)) and inside:
        return f"a {type(value).__name__} of {len(value)} ({', '.join(type(v).__name__ for v in value)})"
    return "None" if value is None else f"a {type(value).__name__}"


def is_file_target(target: str) -> bool:
    """`path/to/file.py` (a file) rather than `pkg.module`."""
    return target.endswith(".py") or os.sep in target


def _load_file(option: str, spec: str, target: str, start_dir: str, error):
    path = os.path.normpath(os.path.join(start_dir, target))
    if not os.path.isfile(path):
        raise error(f"{option} '{spec}': no file {path} ({target} from {start_dir}, {_STARTED_IN})")
    stem = os.path.splitext(os.path.basename(path))[0]
    loaded = sys.modules.get(stem)
    if loaded is not None and getattr(loaded, "__file__", None) == path:  # --model and --data in one file
        return loaded
    name = stem if loaded is None and stem.isidentifier() else f"_acspeed_file_{abs(hash(path)):x}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    folder = os.path.dirname(path)
    if folder not in sys.path:  # its own imports resolve as under `python path/to/file.py`
        sys.path.insert(0, folder)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as caught:  # noqa: BLE001 - the user's code: named in the message
        del sys.modules[name]
        raise error(f"{option} '{spec}': running {path} raised {type(caught).__name__}: {caught}") from caught
    return module


def _import(option: str, spec: str, target: str, start_dir: str, error):
    if start_dir not in sys.path:
        sys.path.insert(0, start_dir)
    try:
        return importlib.import_module(target)
    except ImportError as caught:
        raise error(f"{option} '{spec}': cannot import {target} from {start_dir} ({_STARTED_IN}) or PYTHONPATH "
                    f"({caught})") from caught
    except Exception as caught:  # noqa: BLE001 - the user's code: named in the message
        raise error(f"{option} '{spec}': importing {target} raised {type(caught).__name__}: {caught}") from caught


def resolve(option: str, spec: str, start_dir, error, kind: str):
    """The object `spec` names, `kind` ("function", "class or function") saying what was expected;
    `error` (a ValueError subclass) names what went wrong."""
    target, sep, name = spec.rpartition(":")
    if not sep or not target or not name:
        raise error(f"{option} '{spec}' is not accepted (accepted: pkg.module:name or path/to/file.py:name)")
    start_dir = os.path.abspath(start_dir or os.getcwd())
    if is_file_target(target):
        module = _load_file(option, spec, target, start_dir, error)
        where = f"file {module.__file__}"
    else:
        module = _import(option, spec, target, start_dir, error)
        where = f"module {target}"
    if not hasattr(module, name):
        defined = sorted(key for key, value in vars(module).items()
                         if not key.startswith("_") and callable(value)
                         and getattr(value, "__module__", None) == module.__name__)
        raise error(f"{option} '{spec}': {where} has no {kind} {name} (it defines: {', '.join(defined) or 'none'})")
    return getattr(module, name)
