"""acspeed._exit: at exit, torch's gloo worker threads are waited for until idle (see the module's
docstring for the abort it prevents). The detection is tested on threads named like them: one blocked
on a condition (idle at once), one that keeps running for a while (waited for), one that never
stops (the wait gives up at its timeout)."""
import ctypes
import subprocess
import sys
import threading
import time

import pytest

from acspeed import _exit

PR_SET_NAME = 15
NAME = "acspeed_test_rl"  # a thread name of this test's own (at most 15 characters)

_libc = ctypes.CDLL(None, use_errno=True)


def _named(target):
    def run():
        _libc.prctl(PR_SET_NAME, NAME.encode(), 0, 0, 0)
        target()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _spin_until(event_or_deadline):
    def spin():
        while not event_or_deadline():
            sum(range(1000))  # keeps the thread runnable and switching (the GIL handed back and forth)
    return spin


@pytest.fixture()
def stop():
    event = threading.Event()
    yield event
    event.set()


def _wait_named(count):
    deadline = time.monotonic() + 5
    while len(_exit._thread_states({NAME})) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(_exit._thread_states({NAME})) == count


def test_no_such_threads_returns_at_once():
    begin = time.monotonic()
    assert _exit.wait_until_idle({NAME}, timeout_s=5)
    assert time.monotonic() - begin < 0.1


def test_a_thread_blocked_on_a_condition_is_idle(stop):
    _named(stop.wait)
    _wait_named(1)
    begin = time.monotonic()
    assert _exit.wait_until_idle({NAME}, timeout_s=5)
    assert time.monotonic() - begin < 1


def test_a_running_thread_is_waited_for_until_it_blocks(stop):
    busy_until = time.monotonic() + 0.5
    done = threading.Event()

    def work():
        _spin_until(lambda: time.monotonic() >= busy_until)()
        done.set()
        stop.wait()
    _named(work)
    _wait_named(1)
    assert _exit.wait_until_idle({NAME}, timeout_s=5)
    assert done.is_set()  # it returned only after the thread's work ended


def test_a_thread_that_never_blocks_ends_the_wait_at_the_timeout(stop):
    _named(_spin_until(stop.is_set))
    _wait_named(1)
    begin = time.monotonic()
    assert not _exit.wait_until_idle({NAME}, timeout_s=0.3)
    assert 0.3 <= time.monotonic() - begin < 2


def test_importing_acspeed_makes_the_exit_wait_for_such_threads():
    # A fresh interpreter whose daemon thread (named as the wait looks for) runs 0.6 s past the end of
    # the script: without the wait, the process ends first and "worker done" is never printed.
    code = (
        "import ctypes, threading, time, acspeed\n"
        "from acspeed import _exit\n"
        f"_exit.THREAD_NAMES = frozenset({{'{NAME}'}})\n"
        "libc = ctypes.CDLL(None)\n"
        "def spin():\n"
        f"    libc.prctl({PR_SET_NAME}, b'{NAME}', 0, 0, 0)\n"
        "    end = time.monotonic() + 0.6\n"
        "    while time.monotonic() < end: sum(range(1000))\n"
        "    print('worker done', flush=True)\n"
        "    threading.Event().wait()\n"
        "threading.Thread(target=spin, daemon=True).start()\n"
        "time.sleep(0.05)\n"
        "print('main done', flush=True)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["main done", "worker done"]
