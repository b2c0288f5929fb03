"""acspeed-tune end to end on the CPU: real torchrun workers (2 processes, gloo) tuning a tiny model
(tests/tuner/tiny_models.py) into an isolated store; then `import acspeed` in a new job applies the
stored decision. Also --dry-run, bad input, kill -9 and --resume (the faults inside trials:
test_trial_faults.py; kill -9 at points chosen by seed: test_kill_resume.py)."""
import glob
import json
import os
import pathlib
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

import pytest

from live_processes import processes_mentioning, temp_folders

HERE = pathlib.Path(__file__).resolve().parent
# Few, short trials: each session below runs in well under a minute on two cores.
FAST = ["--warmup", "1", "--steps", "4", "--repeats", "3", "--nproc-per-node", "2", "--seed", "7"]


@pytest.fixture()
def tune(tune_binary, isolated_store, monkeypatch):
    binary = tune_binary
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ["PYTHONPATH"]]))
    monkeypatch.setenv("ACSPEED_PYTHON", sys.executable)

    def run(*args, timeout=240, check=True, **kwargs):
        result = subprocess.run([str(binary), "--db", str(isolated_store), *args], capture_output=True, text=True,
                                timeout=timeout, **kwargs)
        if check and result.returncode != 0:
            pytest.fail(f"acspeed-tune {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
        return result
    run.binary = binary
    return run


def rows(db, sql, *params):
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute(sql, params)]


def test_dry_run_prints_the_plan_and_stores_nothing(tune, isolated_store):
    # A tiny model: the dry run also builds it and runs one batch (the workers' check; tests/cli/test_model_check.py).
    result = tune("--model", "tiny_models:mlp", "--precision", "amp", "--bucket-mb", "1,5,25,100", "--streams", "1,2,4",
                  "--algorithms", "allreduce,reduce_scatter", "--seed", "3", "--dry-run")
    out = result.stdout
    assert "bucket 1,5,25,100 MiB x allreduce,reduce_scatter x streams 1,2,4 x compression none = 24 configs" in out
    # One node: the step model has no inter-node link to forecast, so the plan names what runs.
    assert "strategy: descent: coordinate descent" in out and "seed 3" in out
    assert "strategy: model" not in out
    assert "torch.distributed.run" in out and "acspeed._worker.worker" in out
    assert "nothing launched" in out
    assert not isolated_store.exists()


@pytest.mark.parametrize("args, named", [
    (["--bucket-mb", "1,-5"], "'-5'"),
    (["--algorithms", "allreduce,ring"], "'ring'"),
    (["--streams", "two"], "'two'"),
    (["--precision", "fp8"], "'fp8'"),
    (["--steps", "0"], "'0'"),
    (["--strategy", "anneal"], "'anneal'"),
    (["--nccl-channels", "8"], "needs a GPU"),
    (["--nccl-chunk-bytes", "0,262144"], "needs a GPU"),
    (["--nccl-sockets", "0,2x4"], "needs a GPU"),
    (["--compression", "none,powersgd", "--powersgd-ranks", "0"], "'0' is not a PowerSGD rank"),
    (["--compression", "none,powersgd", "--powersgd-ranks", "1.5"], "'1.5' is not a PowerSGD rank"),
    (["--powersgd-ranks", "4"], "needs powersgd in --compression"),
    (["--data", "loader"], "--data 'loader' is not accepted (accepted: pkg.module:function"),
    (["--trajectory-steps", "5"], "'5'"),
    (["--grad-as-bucket-view", "false,maybe"], "'maybe' is not a boolean"),
])
def test_bad_values_are_one_line_usage_errors(tune, args, named):
    result = tune("--model", "resnet18", *args, "--dry-run", check=False)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and named in lines[0], result.stderr


def test_grad_as_bucket_view_is_searched_only_when_asked(tune):
    plain = tune("--model", "tiny_models:mlp", "--bucket-mb", "5,25", "--streams", "1", "--dry-run").stdout
    assert "x compression none = 4 configs" in plain and "bucket-view" not in plain, plain
    asked = tune("--model", "tiny_models:mlp", "--bucket-mb", "5,25", "--streams", "1", "--grad-as-bucket-view", "false,true",
                 "--dry-run").stdout
    assert "x compression none x grad-as-bucket-view false,true = 8 configs" in asked, asked
    assert "--grad-as-bucket-view LIST" in tune("tune", "--help").stdout


def test_bad_env_pin_is_a_usage_error(tune, monkeypatch):
    monkeypatch.setenv("ACSPEED_STREAMS", "abc")
    result = tune("--model", "resnet18", "--dry-run", check=False)
    assert result.returncode == 2 and "ACSPEED_STREAMS" in result.stderr


def test_powersgd_searches_ranks_1_4_16_and_warms_up_past_its_start_step(tune):
    out = tune("--model", "tiny_models:mlp", "--compression", "none,fp16,powersgd", "--warmup", "2", "--dry-run").stdout
    assert "x compression none,fp16,powersgd x powersgd rank 1,4,16 =" in out, out
    assert "warm-up raised from 2 to 12 steps" in out and "12 warm-up" in out, out
    assert "the convergence guard trains 120-step loss trajectories" in out and "on synthetic" in out, out
    # no GPU here: a 10-minute budget for the search and the decision, the guard's evidence timed apart
    assert ("time budget: 10 min for the search and the decision, and 10 min of its own for the convergence "
            "guard's windows and trajectories: about 20 min in all") in out, out


def test_a_session_without_compression_has_one_budget(tune):
    out = tune("--model", "tiny_models:mlp", "--budget-minutes", "3", "--dry-run").stdout
    assert "time budget: 3 min for the whole session" in out, out


def test_a_bad_powersgd_rank_pin_is_a_usage_error(tune, monkeypatch):
    monkeypatch.setenv("ACSPEED_POWERSGD_RANK", "0")
    result = tune("--model", "resnet18", "--compression", "powersgd", "--dry-run", check=False)
    assert result.returncode == 2 and "ACSPEED_POWERSGD_RANK=0 is out of range" in result.stderr, result.stderr


def test_pinned_knob_is_not_searched(tune, monkeypatch):
    monkeypatch.setenv("ACSPEED_STREAMS", "2")
    out = tune("--model", "tiny_models:mlp", "--streams", "1,2,4", "--dry-run").stdout
    assert "streams 2 x" in out and "pinned (not searched): streams (ACSPEED_STREAMS)" in out


@pytest.mark.slow
@pytest.mark.parametrize("model, named", [("resnet9000", "'resnet9000'"), ("tiny_models:nothing", "nothing")])
def test_a_model_that_cannot_be_built_is_a_usage_error(tune, isolated_store, model, named):
    result = tune("--model", model, *FAST, check=False)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and named in errors[0], result.stderr
    assert rows(isolated_store, "SELECT * FROM sessions") == []


@pytest.mark.slow
def test_data_that_cannot_be_used_is_a_usage_error_before_any_trial(tune, isolated_store):
    # tiny_models:mlp takes no arguments: not a (rank, world_size, batch_size) -> batches function.
    result = tune("--model", "tiny_models:mlp", "--data", "tiny_models:mlp", *FAST, check=False)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "--data 'tiny_models:mlp' must name a function (rank, world_size, batch_size)" \
        in errors[0], result.stderr
    assert rows(isolated_store, "SELECT * FROM sessions") == []


@pytest.mark.slow
def test_tune_then_import_acspeed_applies_the_stored_decision(tuned_store, repo_root):
    # The session (tests/conftest.py's TUNED_ARGS: FAST's options on the mlp, bucket 1,25 x streams 1,2,
    # grid) ran with a stale NNODES=3 in the tuner's environment: the workers count nodes by the launch.
    isolated_store, result = tuned_store.db, tuned_store.tuned
    sessions = rows(isolated_store, "SELECT * FROM sessions")
    assert len(sessions) == 1 and sessions[0]["status"] == "done"
    assert sessions[0]["seed"] == 7 and sessions[0]["strategy"] == "grid"
    assert json.loads(sessions[0]["search_space_json"])["size"] == 4
    assert json.loads(sessions[0]["versions_json"])["torch"]
    trials = rows(isolated_store, "SELECT * FROM trials WHERE session_id = ?", sessions[0]["id"])
    search = [t for t in trials if t["role"] == "search"]
    assert len(search) == 4 and all(t["status"] == "ok" for t in search), trials
    assert len({t["config_json"] for t in search}) == 4
    for t in search:
        assert len(json.loads(t["step_times_json"])) == 4
        metrics = json.loads(t["metrics_json"])
        assert metrics["p50_s"] > 0 and metrics["finite"] is True and metrics["steps"] == 4
    decisions = rows(isolated_store, "SELECT * FROM decisions WHERE active = 1")
    assert len(decisions) == 1, decisions
    decision = decisions[0]
    assert decision["session_id"] == sessions[0]["id"] and decision["world_size"] == 2
    assert decision["nnodes"] == 1
    pairs = [t for t in trials if t["role"] in ("candidate", "baseline")]
    if pairs:  # the best search config was not DDP's defaults: confirmed in 3 pairs, 3 more while they could not decide
        evidence = json.loads(decision["evidence_json"])
        assert len(evidence["pairs"]) in (3, 6, 9) and len(pairs) == 2 * len(evidence["pairs"])
        assert (len(evidence["pairs"]) > 3) == ("undecided on 3 pairs" in result.stdout), result.stdout
        assert decision["ci_low"] is not None
        assert (decision["ci_low"] > 1) == (json.loads(decision["config_json"]) == evidence["candidate"])
    assert f"decision {decision['id']}" in result.stdout

    # A new job with `import acspeed` finds that decision and applies exactly its config.
    env = dict(os.environ, ACSPEED_LOG_LEVEL="info", ACSPEED_DB=str(isolated_store),
               PYTHONPATH=os.pathsep.join([str(HERE), os.environ["PYTHONPATH"]]))  # tiny_models
    for name in ("ACSPEED_DISABLE", "ACSPEED_CONFIG", "ACSPEED_PRECISION"):
        env.pop(name, None)
    bench = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         str(repo_root / "examples" / "Pytorch_ddp_benchmark.py"), "--model", "tiny_models:mlp", "--steps", "3"],
        capture_output=True, text=True, timeout=180, env=env)
    assert bench.returncode == 0, bench.stderr[-3000:]
    sys.path.insert(0, str(repo_root / "python"))
    from acspeed import _core  # noqa: PLC0415
    config = _core.CommConfig.from_json(decision["config_json"])[0]
    # A kept-defaults decision changes nothing, and the line says so (issue 37 item 4: it said
    # "applied decision #N (DDP defaults)"); either way it names the model as tuned.
    said = (f"applied decision #{decision['id']} ({config.describe()}) stored for" if not config.is_default()
            else f"no change (decision #{decision['id']} stored for")
    lines = [line for line in bench.stderr.splitlines() if line.startswith("acspeed: ")]
    assert len(lines) == 1 and lines[0].startswith(f"acspeed: {said}"), bench.stderr[-3000:]
    assert "model tiny_models:mlp (p" in lines[0] and lines[0].endswith("keeps DDP defaults)") == config.is_default()


@pytest.mark.slow
def test_kill_9_loses_no_completed_trial_and_resume_continues(tune, isolated_store, tmp_path):
    args = ["--model", "tiny_models:mlp", "--bucket-mb", "1,2,5,25", "--algorithms", "allreduce", "--streams", "1",
            "--strategy", "grid", "--batch-size", "6", *FAST]
    work_dirs_before = temp_folders("acspeed-tune-*")
    WORK_DIRS = os.path.join(tempfile.gettempdir(), "acspeed-tune-")  # noqa: N806 - this session's, not another's
    tuner = subprocess.Popen([str(tune.binary), "--db", str(isolated_store), *args], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 180
        done = []
        while time.monotonic() < deadline:
            try:
                done = rows(isolated_store, "SELECT * FROM trials") if isolated_store.exists() else []
            except sqlite3.OperationalError:  # the tuner has created the file but not yet its tables
                done = []
            if len(done) >= 2:
                break
            time.sleep(0.2)
        assert len(done) >= 2, "no trial finished in time"
    finally:
        os.kill(tuner.pid, signal.SIGKILL)
        tuner.wait()
    # The workers die with the tuner (parent-death signal on torchrun and on every rank).
    deadline = time.monotonic() + 20
    while processes_mentioning("acspeed._worker.worker", "--batch-size 6", WORK_DIRS) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_mentioning("acspeed._worker.worker", "--batch-size 6", WORK_DIRS) == []
    for folder in temp_folders("acspeed-tune-*") - work_dirs_before:
        shutil.rmtree(folder)  # the killed tuner's work folder (worker logs): it cannot remove it itself
    before = rows(isolated_store, "SELECT * FROM trials ORDER BY ordinal")
    assert len(before) >= 2 and rows(isolated_store, "SELECT status FROM sessions")[0]["status"] == "running"

    result = tune("--resume", "1")
    assert "resuming session 1" in result.stdout
    after = rows(isolated_store, "SELECT * FROM trials ORDER BY ordinal")
    assert after[:len(before)] == before, "stored trials are kept as they were"
    search = [t for t in after if t["role"] == "search"]
    assert sorted(t["config_json"] for t in search) == sorted({t["config_json"] for t in search}), \
        "a config measured before the kill is not measured again"
    assert len(search) == 4
    assert rows(isolated_store, "SELECT status FROM sessions")[0]["status"] == "done"
    assert rows(isolated_store, "SELECT session_id FROM decisions WHERE active = 1")[0]["session_id"] == 1
    again = tune("--resume", "1", check=False)
    assert again.returncode == 2 and "already done" in again.stderr


GUARDED = ["--compression", "none,fp16", "--algorithms", "allreduce", "--streams", "1", "--bucket-mb", "25",
           "--strategy", "grid", "--warmup", "1", "--steps", "12", "--repeats", "3", "--nproc-per-node", "2",
           "--seed", "7"]


@pytest.mark.parametrize("model, passes", [("tiny_models:mlp", True), ("tiny_models:corrupting_mlp", False)])
def test_the_convergence_guard_accepts_fp16_and_rejects_a_corrupting_compressor(tune, isolated_store, model, passes):
    result = tune("--model", model, *GUARDED, timeout=480)
    trials = rows(isolated_store, "SELECT config_json, status, error, metrics_json FROM trials WHERE role = 'search'")
    fp16 = [t for t in trials if json.loads(t["config_json"])["compression"] == "fp16"]
    assert len(fp16) == 1, trials
    guard = json.loads(fp16[0]["metrics_json"])["guard"]
    assert guard["passed"] is passes, guard
    # what the guard cost: the workers time fp16's window and trajectory, the session sums them up
    assert json.loads(fp16[0]["metrics_json"])["trajectory_s"] > 0, fp16[0]
    assert re.search(r"convergence guard: 1 gradient-fidelity window\(s\) of 32 steps \(\d+ s\) and 2 loss trajectories "
                     r"of 120 steps \(\d+ s\): \d+ s of the session's \d+ s so far", result.stdout), result.stdout
    fidelity = guard["fidelity"]
    if passes:
        assert fp16[0]["status"] == "ok" and fidelity["cosine"] > 0.999 and fidelity["norm_error"] < 0.01, guard
    else:
        assert fp16[0]["status"] == "failed" and fidelity["cosine"] < 0.5, guard
        assert "convergence guard: gradient fidelity" in fp16[0]["error"], fp16[0]
        assert "rejected by the convergence guard" in result.stdout + result.stderr
        decision = rows(isolated_store, "SELECT config_json FROM decisions WHERE active = 1")[0]
        assert json.loads(decision["config_json"])["compression"] == "none"


def test_a_rerun_of_the_same_command_trains_the_same_guard_trajectories(tune, tmp_path):
    # Without --seed the seed comes from the job: the same command gets the same one, another job another.
    def planned_seed(*args):
        out = tune("--model", "tiny_models:mlp", "--nproc-per-node", "2", *args, "--dry-run").stdout
        return re.search(r"seed (\d+)", out).group(1)
    assert planned_seed() == planned_seed() != planned_seed("--batch-size", "4")
    # The workers seed torch with it before building the model: two sessions of one command start from the
    # same weights (a model initialised from torch's generator), so the guard's trajectories are the same.
    arguments = GUARDED[:GUARDED.index("--seed")] + ["--trajectory-steps", "24"]
    trajectories = []
    for name in ("first", "second"):
        store = tmp_path / f"{name}.db"
        subprocess.run([str(tune.binary), "--db", str(store), "--model", "tiny_models:unseeded_mlp", *arguments],
                       check=True, capture_output=True, text=True, timeout=480)
        trajectories.append([json.loads(t["metrics_json"])["trajectory"] for t in rows(
            store, "SELECT metrics_json FROM trials WHERE json_extract(metrics_json, '$.trajectory') IS NOT NULL "
            "ORDER BY ordinal")])
    assert len(trajectories[0]) == 2 and trajectories[0] == trajectories[1], trajectories
