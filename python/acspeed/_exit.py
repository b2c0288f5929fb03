"""A clean process exit with torch's gloo backend: its worker threads go idle before Python finalizes.

torch's ProcessGroupGloo runs each collective on a worker thread ("pt_gloo_runloop") that drops its
reference to the finished work only after waking the caller. When the caller's last collective,
destroy_process_group() and the end of the script all fit in that gap (a busy CPU node descheduling
the worker thread), the worker releases the work's tensors while the interpreter is finalizing,
cannot take the GIL, and the process aborts with "terminate called without an active exception"
(SIGABRT) after the job's work is done: torchrun then reports the whole job as failed (figures in
docs/reliability.md, row 12). At exit (atexit, the interpreter still
whole) acspeed releases the GIL and waits until every such thread is idle, at most IDLE_WAIT_S."""
import atexit
import os
import time

THREAD_NAMES = frozenset({"pt_gloo_runloop"})
IDLE_WAIT_S = 2.0
_QUIET_S = 0.01  # a thread asleep with no context switch over this long is blocked for good (a condition wait)


def _thread_states(names) -> dict:
    """{tid: (state letter, context switches so far)} for this process's threads named in `names`;
    {} where /proc is not there."""
    states = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return states
    for tid in tids:
        base = f"/proc/self/task/{tid}"
        try:
            with open(f"{base}/comm") as comm:
                if comm.read().strip() not in names:
                    continue
            with open(f"{base}/stat") as stat:
                state = stat.read().rpartition(")")[2].split()[0]
            with open(f"{base}/status") as status:
                switches = sum(int(line.split()[1]) for line in status
                               if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")))
        except (OSError, IndexError, ValueError):
            continue  # the thread ended meanwhile
        states[tid] = (state, switches)
    return states


def wait_until_idle(names=None, timeout_s: float = IDLE_WAIT_S) -> bool:
    """Sleeps (the GIL released) until every thread named in `names` (default THREAD_NAMES) is asleep
    and has not been scheduled for _QUIET_S, or timeout_s passed. True when they were idle (or there
    were none)."""
    names = THREAD_NAMES if names is None else names
    deadline = time.monotonic() + timeout_s
    before = _thread_states(names)
    while True:
        if not before:
            return True
        time.sleep(_QUIET_S)
        after = _thread_states(names)
        if after == before and all(state == "S" for state, _ in after.values()):
            return True
        if time.monotonic() >= deadline:
            return False
        before = after


def install() -> None:
    atexit.register(wait_until_idle)
