"""The store while a tune writes to it: two tuners at once, `configs activate`/`delete` in the middle
of a tune, eight training jobs importing acspeed while a tuner stores decision after decision, and
the disk under the store filling up. The tuners run the fake rank 0 (fake_worker.py, no torch);
FAKE_WORKER_GATE holds a tune at a trial while the test acts on the store. Costs: about 1 s each,
except the eight jobs (47 s of CPU, nearly all eight processes importing torch)."""
import errno
import json
import os
import pathlib
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from test_tune import rows

HERE = pathlib.Path(__file__).resolve().parent
FAKE = str(HERE / "fake_worker.py")
KEY = "test-box / fake / fp32 / world size 2 / 1 node(s)"


def start_tune(binary, store, gate, *args, mode="fast_streams", hello=None):
    """A tune of the fake model held before trial 1 until `gate` exists (None: not held)."""
    env = dict(os.environ, ACSPEED_PYTHON=FAKE, FAKE_WORKER_MODE=mode, ACSPEED_INSTANCE_TYPE="test-box")
    if gate is not None:
        env["FAKE_WORKER_GATE"] = f"1:{gate}"
    if hello is not None:
        env["FAKE_WORKER_HELLO"] = json.dumps(hello)
    return subprocess.Popen([str(binary), "--db", str(store), "--model", "fake", "--warmup", "1", "--steps", "3",
                             "--repeats", "3", "--strategy", "grid", "--seed", "1", "--precision", "fp32", "--algorithms",
                             "allreduce", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def wait_for(path: pathlib.Path, proc, what: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"the tune ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"the tune did not reach {what} in {timeout} s"
        time.sleep(0.05)


def finish(proc, timeout=60):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"acspeed-tune exited {proc.returncode}:\n{out}\n{err}"
    return out


def test_two_tuners_on_one_store_both_store_their_decision_and_the_last_to_finish_is_active(tune_binary,
                                                                                         tmp_path):
    store = tmp_path / "acspeed.db"
    gates = [tmp_path / "gate-a", tmp_path / "gate-b"]
    tuners = [start_tune(tune_binary, store, gates[0], "--bucket-mb", "5", "--streams", "1,2"),
              start_tune(tune_binary, store, gates[1], "--bucket-mb", "2", "--streams", "1,2")]
    try:
        for gate, proc in zip(gates, tuners):
            wait_for(pathlib.Path(f"{gate}.reached"), proc, "trial 1")
        # Both sessions are open now; let them write the rest of their trials, pairs and decisions at once.
        assert [s["status"] for s in rows(store, "SELECT status FROM sessions")] == ["running", "running"]
        for gate in gates:
            gate.touch()
        outputs = [finish(proc) for proc in tuners]
    finally:
        for proc in tuners:
            if proc.poll() is None:
                proc.kill()
    sessions = rows(store, "SELECT id, status FROM sessions ORDER BY id")
    assert [s["status"] for s in sessions] == ["done", "done"]
    decisions = rows(store, "SELECT id, session_id, active, config_json FROM decisions ORDER BY id")
    assert len(decisions) == 2 and {d["session_id"] for d in decisions} == {s["id"] for s in sessions}
    # Each stored its own config: streams 2 won in both, each with the bucket size it searched.
    buckets = {d["session_id"]: json.loads(d["config_json"])["bucket_cap_mb"] for d in decisions}
    assert sorted(buckets.values()) == [2, 5]
    last = decisions[-1]  # stored last: the second tuner to finish
    assert [d["active"] for d in decisions] == [0, 1]
    said = [o for o in outputs if f"decision {last['id']} (now active for {KEY})" in o]
    assert len(said) == 1, outputs
    for output in outputs:  # each said its decision was active: it was, when that tuner ended
        session = int(re.search(r"^session (\d+) in ", output, re.M)[1])
        mine = next(d for d in decisions if d["session_id"] == session)
        assert f"decision {mine['id']} (now active for {KEY})" in output, output


def test_configs_activate_and_delete_during_a_tune_leave_the_tunes_decision_active(tune_binary, tmp_path):
    store = tmp_path / "acspeed.db"
    old = {"instance_type": "test-box", "model_signature": "p1-0000000000000001", "model_name": "fake",
           "precision": "fp32", "world_size": 2, "nnodes": 1, "torch_version": "2.15.0", "nccl_version": "",
           "cuda_version": "", "batch_size": 8}
    document = tmp_path / "old.json"
    document.write_text(json.dumps({"format": "acspeed-decisions", "version": 1, "decisions": [
        dict(old, active=False, config={"version": 2, "bucket_cap_mb": 1}),
        dict(old, active=True, config={"version": 2, "bucket_cap_mb": 3})]}))
    cli = [str(tune_binary), "--db", str(store), "configs"]
    subprocess.run([*cli, "import", str(document)], check=True, capture_output=True, timeout=60)
    gate = tmp_path / "gate"
    tuner = start_tune(tune_binary, store, gate, "--bucket-mb", "5", "--streams", "1,2")
    try:
        wait_for(pathlib.Path(f"{gate}.reached"), tuner, "trial 1")
        for action in (["activate", "1"], ["delete", "2"], ["list"]):
            done = subprocess.run([*cli, *action], capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, (action, done.stdout, done.stderr)
        assert [(d["id"], d["active"]) for d in rows(store, "SELECT id, active FROM decisions")] == [(1, 1)]
        gate.touch()
        out = finish(tuner)
    finally:
        if tuner.poll() is None:
            tuner.kill()
    assert f"decision 3 (now active for {KEY})" in out, out
    assert [(d["id"], d["active"]) for d in rows(store, "SELECT id, active FROM decisions ORDER BY id")] == \
        [(1, 0), (3, 1)]
    assert json.loads(rows(store, "SELECT config_json FROM decisions WHERE id = 3")[0]["config_json"])["streams"] == 2
    assert rows(store, "SELECT status FROM sessions") == [{"status": "done"}]


def _lines(proc, into: list):
    for line in proc.stdout:
        into.append(json.loads(line))


@pytest.mark.slow
def test_eight_jobs_importing_acspeed_while_a_tuner_writes_each_see_whole_decisions(tune_binary, tmp_path):
    store = tmp_path / "acspeed.db"
    stop = tmp_path / "stop"
    env = dict(os.environ, ACSPEED_DB=str(store), ACSPEED_INSTANCE_TYPE="test-box", ACSPEED_STREAMS="1",
               PYTHONPATH=os.pathsep.join([str(HERE), os.environ["PYTHONPATH"]]))
    for name in ("ACSPEED_DISABLE", "ACSPEED_CONFIG", "ACSPEED_PRECISION", "ACSPEED_BUCKET_MB"):
        env.pop(name, None)
    jobs = [subprocess.Popen([sys.executable, str(HERE / "lookup_job.py"), str(stop)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env) for _ in range(8)]
    seen = [[] for _ in jobs]
    readers = [threading.Thread(target=_lines, args=(job, lines), daemon=True) for job, lines in zip(jobs, seen)]
    for reader in readers:
        reader.start()
    try:
        deadline = time.monotonic() + 400
        while not all(lines for lines in seen):  # each job's first line: its model's signature and versions
            assert all(job.poll() is None for job in jobs), [job.communicate() for job in jobs if job.poll() is not None]
            assert time.monotonic() < deadline, "the jobs did not start in time"
            time.sleep(0.1)
        hello = {key: seen[0][0][key] for key in ("model_signature", "torch_version")}
        hello.update(world_size=1, local_world_size=1)
        # One tune after another, each storing a new active decision (its own bucket size, 2 streams),
        # while every job keeps building DDP models; the next tune starts once every job saw the last one.
        for bucket in (1, 2, 3, 4):
            finish(start_tune(tune_binary, store, None, "--bucket-mb", str(bucket), "--streams", "1,2",
                              "--nproc-per-node", "1", hello=hello))
            newest = rows(store, "SELECT max(id) AS id FROM decisions")[0]["id"]
            while not all(any(line.get("decision") == newest for line in lines) for lines in seen):
                assert all(job.poll() is None for job in jobs), "a job ended during the tunes"
                assert time.monotonic() < deadline, f"not every job saw decision {newest}"
                time.sleep(0.05)
    finally:
        stop.touch()
        for job in jobs:
            try:
                job.wait(timeout=60)
            except subprocess.TimeoutExpired:
                job.kill()
        for reader in readers:
            reader.join(timeout=10)
    for job in jobs:
        assert job.returncode == 0, job.stderr.read()[-3000:]
    stored = {d["id"]: json.loads(d["config_json"]) for d in rows(store, "SELECT id, config_json FROM decisions")}
    assert len(stored) == 4
    for lines in seen:
        lookups = lines[1:]
        ids = [line["decision"] for line in lookups if line["decision"] is not None]
        assert ids == sorted(ids), "a job saw an older decision after a newer one"
        for line in lookups:
            assert [level for level, _ in line["log"]] == ["INFO"], line  # no warning, no error
            message = line["log"][0][1]
            if line["decision"] is None:  # before the first tune stored its decision
                assert line["bucket_bytes"] == 25 * 1024 * 1024 and "DDP defaults" in message, line
                continue
            config = stored[line["decision"]]  # a decision that is in the store, read whole
            assert line["bucket_bytes"] == config["bucket_cap_mb"] * 1024 * 1024, (line, config)
            assert f"(bucket {config['bucket_cap_mb']:g} MiB, allreduce, 2 streams)" in message, line


@pytest.fixture()
def small_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], check=True, timeout=30)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True, timeout=30)


def fill(disk: pathlib.Path) -> pathlib.Path:
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 4096)
        except OSError as error:
            assert error.errno == errno.ENOSPC, error
    return filler


def test_a_full_disk_during_a_tune_is_reported_and_the_store_stays_intact(tune_binary, small_disk):
    """The tune runs on a 2 MiB tmpfs; the test fills it while the fake rank 0 holds trial 1."""
    store = small_disk / "acspeed.db"
    gate = small_disk.parent / "gate"
    tuner = start_tune(tune_binary, store, gate, "--bucket-mb", "1,2,5", "--streams", "1", mode="ok")
    try:
        wait_for(pathlib.Path(f"{gate}.reached"), tuner, "trial 1")
        before = rows(store, "SELECT * FROM trials ORDER BY ordinal")
        filler = fill(small_disk)
        gate.touch()
        out, err = tuner.communicate(timeout=60)
    finally:
        if tuner.poll() is None:
            tuner.kill()
    assert tuner.returncode == 1, (out, err)
    assert "the disk is full" in err and str(store) in err, err
    assert "rolled back" in err and "acspeed-tune --resume 1" in err and "internal error" not in err, err
    assert len(before) == 1
    kept = re.search(r"worker logs kept in (\S+)", err)
    assert kept, err
    shutil.rmtree(kept[1])
    # Still full: the store opens read-only, passes SQLite's integrity check and holds what it held.
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert rows(store, "SELECT * FROM trials ORDER BY ordinal")[:1] == before
    listed = subprocess.run([str(tune_binary), "--db", str(store), "report", "--format", "json"], capture_output=True,
                            text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    # Space back: the session resumes and finishes.
    filler.unlink()
    resumed = subprocess.run([str(tune_binary), "--db", str(store), "--resume", "1"], capture_output=True, text=True,
                             timeout=60, env=dict(os.environ, ACSPEED_PYTHON=FAKE, ACSPEED_INSTANCE_TYPE="test-box"))
    assert resumed.returncode == 0, resumed.stderr
    assert rows(store, "SELECT status FROM sessions") == [{"status": "done"}]
    assert len(rows(store, "SELECT * FROM decisions WHERE active = 1")) == 1
