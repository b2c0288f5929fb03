"""kill -9 of acspeed-tune at points chosen by seed, a property test: whatever the point, the store
opens afterwards and passes SQLite's integrity check, every trial committed before the kill is still
there unchanged, no worker is left running, and `--resume` finishes the session without measuring
again a search config already measured or a decision pair whose two runs were both stored (a pair
cut in half is run again), with exactly one decision for the session.

The workers are the fake rank 0 (fake_worker.py, no torch: a trial takes milliseconds, so the
tuner spends much of its time writing to the store). A seed picks how many trials to let finish
and one of three ways to kill:
  at       after a random delay of up to 20 ms;
  locked   inside a store write: the test holds the store's write lock, so the tuner's next write
           waits in its transaction, and is killed there;
  syscall  inside a write(2)/fsync(2) to the store or its WAL: the tuner is stopped (SIGSTOP) at
           random instants until it is caught in one, then killed (falls back to `locked` when it
           is not caught in 300 tries).
CI cost: 8 seeds, about 1.5 s each (two short tuner runs): about 15 s."""
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time

import pytest

from live_processes import processes_mentioning, temp_folders

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fake_worker.py")
# 6 search trials (streams 2 are twice as fast, so they win) and 3 decision pairs: 12 trials.
ARGS = ["--model", "fake", "--bucket-mb", "1,5,25", "--streams", "1,2", "--algorithms", "allreduce",
        "--strategy", "grid", "--warmup", "1", "--steps", "3", "--repeats", "3", "--seed", "3"]
TRIALS = 12
WRITE_SYSCALLS = {1, 18, 20, 74, 75}  # write, pwrite64, writev, fsync, fdatasync (x86-64)


def trial_rows(db_path) -> list:
    if not os.path.exists(db_path):
        return []
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5) as db:
        try:
            return db.execute("SELECT * FROM trials ORDER BY ordinal").fetchall()
        except sqlite3.OperationalError:  # the schema is not there yet
            return []


def in_store_write(pid: int, db_path: str) -> bool:
    """Whether a thread of the stopped process `pid` sits in a write or sync call on the store's files."""
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/syscall", encoding="ascii") as f:
                fields = f.read().split()
            if not fields or not fields[0].isdigit() or int(fields[0]) not in WRITE_SYSCALLS:
                continue
            target = os.readlink(f"/proc/{pid}/fd/{int(fields[1], 16)}")
        except (OSError, ValueError, IndexError):
            continue
        if target.startswith(db_path):
            return True
    return False


def wait_until_stopped(pid: int) -> None:
    for _ in range(200):
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            if f.read().rsplit(")", 1)[1].split()[0] in ("T", "t", "Z"):
                return
        time.sleep(0.0005)


def kill_in_a_write_syscall(proc, db_path: str, rng) -> bool:
    for _ in range(300):
        time.sleep(rng.uniform(0, 0.003))
        try:
            os.kill(proc.pid, signal.SIGSTOP)
        except ProcessLookupError:
            return False
        wait_until_stopped(proc.pid)
        caught = in_store_write(proc.pid, db_path)
        if caught:
            os.kill(proc.pid, signal.SIGKILL)
            return True
        os.kill(proc.pid, signal.SIGCONT)
        if proc.poll() is not None:
            return False
    return False


def kill_while_it_waits_for_the_lock(proc, db_path: str, rng) -> None:
    with sqlite3.connect(db_path, timeout=10, isolation_level=None) as db:
        db.execute("BEGIN IMMEDIATE")
        time.sleep(0.2 + rng.uniform(0, 0.2))  # the tuner's next write now waits on the lock
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        db.execute("ROLLBACK")


@pytest.mark.parametrize("seed", range(8))
def test_kill_9_at_a_seeded_point_keeps_the_store_sound_and_resume_reruns_nothing(tune_binary, isolated_store,
                                                                                   seed):
    rng = random.Random(seed)
    finished_before_kill = rng.randint(0, TRIALS - 1)
    how = rng.choice(["at", "locked", "syscall"])
    env = dict(os.environ, ACSPEED_PYTHON=FAKE, FAKE_WORKER_MODE="fast_streams")
    db_path = str(isolated_store)
    work_dirs_before = temp_folders("acspeed-tune-*")
    proc = subprocess.Popen([str(tune_binary), "--db", db_path, *ARGS], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 60
        while len(trial_rows(db_path)) < finished_before_kill and proc.poll() is None:
            assert time.monotonic() < deadline, "the tuner made no progress"
            time.sleep(0.002)
        if how == "syscall" and not kill_in_a_write_syscall(proc, db_path, rng):
            how = "locked"
        if how == "locked" and proc.poll() is None and os.path.exists(db_path):
            kill_while_it_waits_for_the_lock(proc, db_path, rng)
        if how == "at":
            time.sleep(rng.uniform(0, 0.02))
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    committed = trial_rows(db_path)  # nothing can be written any more: this is what the kill left
    print(f"seed {seed}: killed {how} after {len(committed)} stored trial(s)")

    deadline = time.monotonic() + 10  # the workers die with the tuner (parent-death signal)
    while processes_mentioning(FAKE, os.path.join(tempfile.gettempdir(), "acspeed-tune-")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_mentioning(FAKE, os.path.join(tempfile.gettempdir(), "acspeed-tune-")) == []
    for folder in temp_folders("acspeed-tune-*") - work_dirs_before:
        shutil.rmtree(folder)  # the killed tuner's work folder: logs only, nothing runs there
    if not os.path.exists(db_path):
        return
    with sqlite3.connect(db_path) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        sessions = db.execute("SELECT id, status FROM sessions").fetchall() if "sessions" in tables else []
    # The tuner opens it (killed while creating the store: an empty file, which it takes as a new store).
    opened = subprocess.run([str(tune_binary), "--db", db_path, "configs", "list"], capture_output=True, text=True,
                            timeout=60)
    assert opened.returncode == 0, opened.stderr
    if not sessions:
        return
    report = subprocess.run([str(tune_binary), "--db", db_path, "report", "--format", "json"], capture_output=True,
                            text=True, timeout=60)
    assert report.returncode == 0, report.stderr
    if sessions[0][1] != "running":
        return

    resumed = subprocess.run([str(tune_binary), "--db", db_path, "--resume", "1"], capture_output=True, text=True,
                             timeout=120, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = trial_rows(db_path)
    assert after[:len(committed)] == committed, "stored trials are kept as they were"
    with sqlite3.connect(db_path) as db:
        db.row_factory = sqlite3.Row
        rows = [dict(r) for r in db.execute("SELECT * FROM trials ORDER BY ordinal")]
        assert [r["status"] for r in db.execute("SELECT status FROM sessions")] == ["done"]
        assert db.execute("SELECT COUNT(*) FROM decisions WHERE session_id = 1").fetchone()[0] == 1
    old, new = rows[:len(committed)], rows[len(committed):]
    measured = {r["config_json"] for r in old if r["role"] == "search"}
    assert not [r for r in new if r["role"] == "search" and r["config_json"] in measured], \
        "a config measured before the kill is measured again"
    assert len({r["config_json"] for r in rows if r["role"] == "search"}) == 6

    def pair_of(r):
        return json.loads(r["metrics_json"]).get("pair")
    finished_pairs = {p for p in {pair_of(r) for r in old if r["role"] == "candidate"}
                      if any(r["role"] == "baseline" and pair_of(r) == p for r in old)}
    assert not [r for r in new if r["role"] in ("candidate", "baseline") and pair_of(r) in finished_pairs], \
        f"a decision pair stored whole before the kill ({sorted(finished_pairs)}) is run again"
    assert processes_mentioning(FAKE, os.path.join(tempfile.gettempdir(), "acspeed-tune-")) == []
    assert temp_folders("acspeed-tune-*") - work_dirs_before == set()
