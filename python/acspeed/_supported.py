"""The Python and torch versions an installed acspeed supports, as its package metadata states them
(pyproject.toml's requires-python and torch requirement), checked at `import acspeed`. pip enforces
them at install time; this catches an environment changed afterwards (another torch installed over
it), which otherwise fails inside the compiled runtime or torch's internals. A checkout that is not
installed has no metadata and is not checked. Also what this torch's init_process_group accepts
(device_id_kwargs), for the calls acspeed makes."""
import importlib.metadata
import platform
import re

_CLAUSE = re.compile(r"(>=|<=|==|!=|>|<)\s*([0-9]+(?:\.[0-9]+)*)")
_TORCH = re.compile(r"torch(?![\w.-])\s*\(?\s*([^;)]*?)\s*\)?\s*$")  # a marker (`; extra == ...`) never matches


def _release(version: str) -> tuple:
    """(2, 15, 0) for "2.15.0+cu124"; local and pre-release parts are ignored."""
    match = re.match(r"[0-9]+(?:\.[0-9]+)*", version.strip())
    if match is None:
        raise ValueError(f"version {version!r} does not start with a release number")
    return tuple(int(part) for part in match.group(0).split("."))


def satisfies(version: str, specifier: str) -> bool:
    """Whether `version` meets every comma-separated clause of `specifier` (">=2.1,<3"); the
    operators are >=, <=, >, <, == and != on release numbers, the forms the metadata uses."""
    have = _release(version)
    for clause in (part.strip() for part in specifier.split(",")):
        if not clause:
            continue
        match = _CLAUSE.fullmatch(clause)
        if match is None:
            raise ValueError(f"version clause {clause!r} of {specifier!r} is not one of >=, <=, >, <, ==, != "
                             "followed by a release number")
        operator, want = match.group(1), _release(match.group(2))
        width = max(len(have), len(want))
        a, b = have + (0,) * (width - len(have)), want + (0,) * (width - len(want))
        if not {">=": a >= b, "<=": a <= b, ">": a > b, "<": a < b, "==": a == b, "!=": a != b}[operator]:
            return False
    return True


def problems(distribution: str = "acspeed") -> list:
    """One line per unsupported version in this environment, naming it and the supported range; []
    when all are supported or acspeed is not installed (a checkout)."""
    try:
        meta = importlib.metadata.metadata(distribution)
    except importlib.metadata.PackageNotFoundError:
        return []
    found = []
    python, python_range = platform.python_version(), meta.get("Requires-Python")
    if python_range and not satisfies(python, python_range):
        found.append(f"acspeed {meta['Version']} supports Python {python_range}; this is Python {python}")
    for requirement in meta.get_all("Requires-Dist") or []:
        match = _TORCH.match(requirement)
        if match is None:
            continue
        torch_range = match.group(1) or "(any)"
        try:
            torch = importlib.metadata.version("torch")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"acspeed {meta['Version']} needs torch {torch_range}; torch is not installed")
            continue
        if not satisfies(torch, match.group(1)):
            found.append(f"acspeed {meta['Version']} supports torch {torch_range}; this is torch {torch}")
    return found


def device_id_kwargs(device, init_process_group=None) -> dict:
    """{"device_id": device} for torch.distributed.init_process_group (or the given one) on CUDA where
    its signature has that parameter, else {} (a CPU job, an older torch). It binds the default group
    to this rank's GPU: NCCL connects at init, and torch 2.15's nccl2 uses that GPU rather than
    guessing it from LOCAL_RANK (docs/nccl2.md). Ranks sharing a GPU (ACSPEED_SHARE_GPUS) pass the
    same device; each has its own NCCL host identity (share_gpus.py)."""
    if getattr(device, "type", None) != "cuda":
        return {}
    import inspect  # noqa: PLC0415 - only for a CUDA job's one call

    if init_process_group is None:
        import torch.distributed as dist  # noqa: PLC0415

        init_process_group = dist.init_process_group
    try:
        parameters = inspect.signature(init_process_group).parameters
    except (TypeError, ValueError):  # no signature to read: leave the call as it was
        return {}
    return {"device_id": device} if "device_id" in parameters else {}
