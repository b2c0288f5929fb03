"""The console entry points `acspeed-tune` and `acspeed-testbed` (pyproject.toml's scripts): each
replaces itself with the executable of the same name bundled in the acspeed package (acspeed/bin/),
which finds its package and this environment's interpreter relative to itself. A module of its own
beside the package, not inside it: importing `acspeed` patches DDP and needs torch, a program does not."""
import os
import pathlib
import sys

BIN = pathlib.Path(__file__).resolve().parent / "acspeed" / "bin"


def _exec(name: str) -> None:
    program = BIN / name
    if not os.access(program, os.X_OK):
        sys.exit(f"{name}: the bundled executable {program} is missing or not executable; reinstall acspeed")
    # argv[0] as the user typed the command (its name, not this package's path inside site-packages):
    # sessions and reports record the command line.
    os.execv(program, [os.path.basename(sys.argv[0]) or name, *sys.argv[1:]])


def tune() -> None:
    _exec("acspeed-tune")


def testbed() -> None:
    _exec("acspeed-testbed")
