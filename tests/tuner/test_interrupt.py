"""acspeed-tune interrupted: SIGTERM (or Ctrl-C) while a trial runs ends the session as interrupted,
stores what was done, names the --resume command, exits 128 + the signal and leaves no worker
behind. The workers are the fake rank 0 (fake_worker.py, no torch), whose first trial never answers.
About 3 s."""
import os
import signal
import sqlite3
import subprocess
import tempfile
import time

import pytest

from live_processes import processes_mentioning

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fake_worker.py")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_interrupted_session_is_stored_resumable_and_leaves_no_worker(tune_binary, isolated_store, sig):
    env = {**os.environ, "ACSPEED_PYTHON": FAKE, "FAKE_WORKER_MODE": "hang:0"}
    started = time.monotonic()
    proc = subprocess.Popen([str(tune_binary), "--db", str(isolated_store), "--model", "fake", "--warmup", "1",
                             "--steps", "3", "--seed", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        line = ""
        while "session " not in line:  # "session N in STORE": trial 0 is being sent now
            line = proc.stdout.readline()
            assert line, f"acspeed-tune ended early: {proc.stderr.read()}"
            assert time.monotonic() - started < 60
        workers = processes_mentioning(FAKE, os.path.join(tempfile.gettempdir(), "acspeed-tune-"))
        assert workers, "the fake worker is not running"
        time.sleep(0.5)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, err
    assert time.monotonic() - started < 30  # a trial in flight cannot hear "stop": its workers are killed
    assert "continue with `acspeed-tune --resume 1`" in err, err
    with sqlite3.connect(isolated_store) as db:
        assert db.execute("SELECT status FROM sessions").fetchall() == [("interrupted",)]
    assert not [pid for pid in workers if os.path.exists(f"/proc/{pid}")]  # reaped, not left running
