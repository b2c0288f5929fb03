"""A read-only look for the tuner tests: which processes are still running (/proc), which folders are in
the temporary directory (the tuner's work folders and torchrun's logs go to TMPDIR, else /tmp; the suite
gives each of its parallel workers a TMPDIR of its own, tests/conftest.py)."""
import glob
import os
import pathlib
import tempfile


def processes_mentioning(*texts: str) -> list:
    """Pids of the live processes whose command line (arguments joined by spaces) contains every one
    of `texts`."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if all(text in cmdline for text in texts):
            found.append(int(entry.name))
    return found


def temp_folders(pattern: str) -> set:
    """The paths in the temporary directory matching the glob `pattern` (e.g. "acspeed-tune-*")."""
    return set(glob.glob(os.path.join(tempfile.gettempdir(), pattern)))
