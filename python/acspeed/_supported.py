"""The Python and torch versions an installed acspeed supports, as its package metadata states them
(pyproject.toml's requires-python and torch requirement), checked at `import acspeed`. pip enforces
them at install time; this catches an environment changed afterwards (another torch installed over
it), which otherwise fails inside the compiled runtime or torch's internals. A checkout that is not
installed has no metadata and is not checked."""
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
