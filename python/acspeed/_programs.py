"""The console entry points `acspeed-tune` and `acspeed-testbed` (pyproject.toml's scripts): each
replaces itself with the executable of the same name bundled in this package (acspeed/bin/), which
finds this package and this environment's interpreter relative to itself."""
import os
import pathlib
import sys

BIN = pathlib.Path(__file__).resolve().parent / "bin"


def _exec(name: str) -> None:
    program = BIN / name
    if not os.access(program, os.X_OK):
        sys.exit(f"{name}: the bundled executable {program} is missing or not executable; reinstall acspeed")
    os.execv(program, [str(program), *sys.argv[1:]])


def tune() -> None:
    _exec("acspeed-tune")


def testbed() -> None:
    _exec("acspeed-testbed")
