"""A read-only look at /proc for the tuner tests: which processes are still running."""
import pathlib


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
