"""acspeed-tune predict on sessions tuned against the fake rank 0 (tests/tuner/fake_worker.py): in
mode `link` its steps follow the step model's physics (compute 100 ms, forward + optimizer 40 ms, 2 ms
per bucket, 125 MB/s on a 1 Gbit testbed link, 46.8 MB of gradients, head 85 ms), so the predictions
have known values; in mode `ok` (one node, no probe) there is nothing to predict. One flow's link is
fitted from the calibration trial alone (the fp16 trials stay out of it: step_model.h): 46.8 MB in
3 x 2 ms + 46.8 MB / 125 MB/s, so the latency is folded into its rate (RATE below)."""
import json
import os
import pathlib
import subprocess

import pytest

FAKE_WORKER = pathlib.Path(__file__).resolve().parents[1] / "tuner" / "fake_worker.py"
RATE = 46.8e6 / (3 * 0.002 + 46.8e6 / 125e6)  # bytes/s: one flow, fitted on the calibration trial


@pytest.fixture()
def tuned(tune_binary, isolated_store, monkeypatch):
    def run(mode, space=("--bucket-mb", "5,25", "--compression", "none,fp16", "--streams", "1,2")):
        monkeypatch.setenv("ACSPEED_PYTHON", str(FAKE_WORKER))
        monkeypatch.setenv("FAKE_WORKER_MODE", mode)
        monkeypatch.setenv("ACSPEED_INSTANCE_TYPE", "testbed-2x1@1gbit")
        result = subprocess.run([str(tune_binary), "--db", str(isolated_store), "--model", "fake", *space,
                                 "--nproc-per-node", "2", "--warmup", "1", "--steps", "3", "--budget-minutes", "0"],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout
    return run


def predict(tune_binary, store, *args):
    return subprocess.run([str(tune_binary), "--db", str(store), "predict", *args], capture_output=True, text=True,
                          timeout=60)


def test_predictions_follow_the_calibrated_link_to_other_rates_and_node_counts(tune_binary, isolated_store, tuned):
    out = tuned("link")
    assert "bound 420.4 ms (efficiency 90%)" in out  # DDP defaults' trial line: 40 ms + 46.8 MB at RATE
    result = predict(tune_binary, isolated_store, "--latest", "--link", "500mbit,10gbit", "--nnodes", "2,4", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["version"] == 1 and "predict" in doc["command_line"]
    assert doc["settings"]["ACSPEED_INSTANCE_TYPE"] == "testbed-2x1@1gbit"
    assert doc["versions"]["acspeed"] and doc["calibration"]["link_bits_per_s"] == 1_000_000_000
    rows = {(p["baseline"], p["link_bits_per_s"], p["nnodes"]): p for p in doc["predictions"]}
    slow = rows[(True, 500_000_000, 2)]
    # head 85 ms + 46.8 MB at half RATE; bound = 40 ms + that wire time.
    assert slow["step_s"] == pytest.approx(0.085 + 46.8e6 / (RATE / 2), abs=1e-4)
    assert slow["bound_s"] == pytest.approx(0.04 + 46.8e6 / (RATE / 2), abs=1e-4)
    # 4 nodes: ring allreduce puts 2 x 3/4 of the gradients on each node's link.
    assert rows[(True, 500_000_000, 4)]["wire_bytes"] == int(1.5 * 46.8e6)
    # 10 Gbit: compute-bound bound.
    assert rows[(True, 10_000_000_000, 2)]["bound_s"] == pytest.approx(0.1)
    tuned_rows = [p for p in doc["predictions"] if not p["baseline"]]
    # One flow: the model measured only fp16 (it forecast the rest slower). Two streams are two flows
    # (reduce-scatter's two phases on gloo too; with two streams, four), which no calibration trial
    # ran: a config of each count was measured before anything was pruned or stopped, and the link is
    # fitted per flow count.
    assert tuned_rows and all(p["config"]["compression"] == "fp16" for p in tuned_rows if p["flows"] == 1)
    assert any(p["flows"] == 2 for p in tuned_rows) and any(p["flows"] == 4 for p in tuned_rows)
    assert [link["flows"] for link in doc["calibration"]["links"]] == [1, 2, 4]
    # fp16's cores were busy 200 ms per step: at 10 Gbit its head + wire time (about 156 ms) is below
    # that CPU floor, which then sets the step; the bound stays compute and wire time.
    fast = [p for p in tuned_rows if p["link_bits_per_s"] == 10_000_000_000 and p["config"]["compression"] == "fp16"]
    assert fast and all(p["cpu_floor_s"] == pytest.approx(0.2) and p["step_s"] == pytest.approx(0.2) for p in fast)
    assert all(p["bound_s"] < 0.2 for p in fast)
    assert rows[(True, 10_000_000_000, 2)]["cpu_floor_s"] is None  # DDP defaults reported none
    table = predict(tune_binary, isolated_store, "--latest", "--link", "2gbit")
    assert table.returncode == 0, table.stderr
    assert "step (ms)" in table.stdout and "bound (ms)" in table.stdout and "link (Gbit/s)" in table.stdout
    assert "flows" in table.stdout and "per flow count: 1 flow(s)" in table.stdout
    assert "CPU floor (ms)" in table.stdout and "200.0" in table.stdout
    assert "DDP defaults (baseline)" in table.stdout


def test_powersgd_is_bounded_by_its_factors_wire_time_plus_its_own_compute(tune_binary, isolated_store, tuned):
    # One 11700x1000 fp32 matrix: rank 4 sends (11700 + 1000) x 4 floats = 203200 bytes per step and rank.
    # The calibration trial alone fits the link (fp16's and powersgd's own trials stay out of it).
    out = tuned("link", ("--bucket-mb", "25", "--streams", "1", "--compression", "fp16,powersgd", "--powersgd-ranks",
                         "4"))
    # compute-bound at 1 Gbit: 100 ms + PowerSGD's 15 ms; measured 95 + 15 ms + 3 buckets x 3 x 2 ms + 1.6 ms
    trial = next(line for line in out.splitlines() if line.startswith("trial") and "powersgd" in line)
    assert "powersgd compute 15.0 ms" in trial and "bound 115.0 ms (efficiency 89%)" in trial, trial
    decision = next(line for line in out.splitlines() if "decision" in line and "bound" in line)
    assert "powersgd" in decision and "bound of 115.0 ms (efficiency 89%)" in decision, decision
    result = predict(tune_binary, isolated_store, "--latest", "--link", "10mbit", "--json")
    assert result.returncode == 0, result.stderr
    row = next(p for p in json.loads(result.stdout)["predictions"] if p["config"]["compression"] == "powersgd")
    assert row["wire_bytes"] == 203200
    # 10 Mbit: forward + optimizer 40 ms + 203200 bytes at RATE / 100 + 15 ms, which overlaps nothing;
    # the step: its head at 1 Gbit (its measured step less 203200 bytes at RATE) + the wire time
    slow = 203200 / (RATE / 100)
    assert row["bound_s"] == pytest.approx(0.04 + slow + 0.015, abs=1e-6)
    measured = 0.095 + 0.015 + 0.018 + 203200 / 125e6
    assert row["step_s"] == pytest.approx(measured - 203200 / RATE + slow, abs=1e-6)
    table = predict(tune_binary, isolated_store, "--latest")
    assert table.returncode == 0 and "not predicted" not in table.stdout, table.stdout + table.stderr


def test_a_session_without_the_models_trials_is_an_error_naming_what_is_missing(tune_binary, isolated_store, tuned):
    tuned("ok")  # one node, no probe: the session runs no compute-only trial
    result = predict(tune_binary, isolated_store, "--latest")
    assert result.returncode == 1
    assert "cannot be predicted" in result.stderr and "compute-only" in result.stderr, result.stderr


@pytest.mark.parametrize("args, named", [(["--latest", "--link", "fast"], "'fast'"),
                                         (["--latest", "--nnodes", "0"], "--nnodes"),
                                         (["--session", "1", "--latest"], "one of --session"),
                                         ([], "one of --session")])
def test_bad_input_is_a_usage_error_naming_the_value(tune_binary, isolated_store, args, named):
    result = predict(tune_binary, isolated_store, *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert named in result.stderr
