"""The trial worker's modes for the step model (tuner/step_model.h), with real torchrun ranks (2
processes, gloo): "compute" runs the bare model without communication and times forward and the
optimizer apart (and the hello describes the gradients' shapes); "hooked" runs DDP's defaults through acspeed's comm hook so the probe reports the
buckets' count and bytes, which plain DDP (no hook) does not. And the convergence guard's
gradient-fidelity window (tuner/src/convergence_guard.h), measured only when a request asks."""
import os
import pathlib
import socket
import subprocess
import sys

import pytest

from acspeed import protocol

HERE = pathlib.Path(__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def worker(tmp_path):
    """Starts two worker ranks on the tiny MLP; yields a function sending one trial, returning its result."""
    path = str(tmp_path / "control.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    server.settimeout(120)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ["PYTHONPATH"]]))
    ranks = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                              f"--master_port={_free_port()}", "-m", "acspeed.worker", "--model", "tiny_models:mlp",
                              "--batch-size", "4", "--control", path], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        connection, _ = server.accept()
        connection.settimeout(120)
        reader = connection.makefile("r")
        hello = protocol.decode(reader.readline())
        assert hello["type"] == "hello", hello

        def trial(ident, mode=None, fidelity_steps=None, **config):
            request = protocol.trial(ident, dict({"version": 2}, **config), warmup=1, steps=3, mode=mode,
                                     fidelity_steps=fidelity_steps)
            connection.sendall(protocol.encode(request))
            return protocol.decode(reader.readline())

        trial.probe = hello["probe"]
        trial.param_bytes = hello["param_bytes"]
        trial.gradients = hello["gradients"]
        yield trial
        try:
            connection.sendall(protocol.encode(protocol.stop()))
            ranks.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            pass  # a failed trial ended the workers already
    finally:
        if ranks.poll() is None:
            ranks.kill()
            ranks.wait()
        server.close()


def test_compute_mode_times_the_bare_model_and_its_phases(worker):
    result = worker(1, mode="compute")
    assert result["status"] == "ok", result
    assert len(result["step_times_s"]) == 3 and result["finite"] is True
    step = sorted(result["step_times_s"])[1]
    assert 0 < result["forward_s"] < step and 0 < result["optimizer_s"] < step
    assert "comm_s" not in result and "bucket_count" not in result  # no DDP, no probe, no communication
    # The hello described the gradients as PowerSGD factors them (what the step model counts its bytes
    # from): tiny_models.mlp's three Linear weights (out x in) and three biases, fp32.
    assert worker.gradients == {"matrices": [[256, 64, 4, 1], [256, 256, 4, 1], [10, 256, 4, 1]],
                                "vectors": [[256, 4, 2], [10, 4, 1]]}, worker.gradients


def test_hooked_mode_reports_the_buckets_that_plain_ddp_does_not(worker):
    if not worker.probe:
        pytest.skip("the probes (acspeed._probes) are not built")
    plain = worker(1)
    hooked = worker(2, mode="hooked")
    assert plain["status"] == "ok" and hooked["status"] == "ok", (plain, hooked)
    assert "bucket_count" not in plain  # DDP's built-in allreduce: no hook reports buckets
    assert hooked["bucket_count"] >= 1 and hooked["comm_s"] > 0
    assert hooked["bucket_bytes"] == worker.param_bytes  # every gradient, uncompressed


def test_an_unknown_mode_fails_the_trial_naming_it(worker):
    result = worker(1, mode="teleport")
    assert result["status"] == "failed" and "'teleport'" in result["error"], result


def test_the_fidelity_window_is_measured_when_asked_and_error_feedback_closes_it(worker):
    psgd = {"compression": "powersgd", "powersgd_rank": 1, "powersgd_start_step": 0}
    unasked = worker(1, **psgd)
    short, long = worker(2, fidelity_steps=2, **psgd), worker(3, fidelity_steps=32, **psgd)
    fp16 = worker(4, fidelity_steps=4, compression="fp16")
    for result in (unasked, short, long, fp16):
        assert result["status"] == "ok", result
    assert not any(key.startswith("fidelity") for key in unasked), unasked
    assert short["fidelity_steps"] == 2 and long["fidelity_steps"] == 32 and fp16["fidelity_steps"] == 4
    # Rank 1 loses most of each step's gradient (the per-step cosine is low); error feedback carries what
    # it left out into the next steps, so over a longer window the sum closes on the exact one.
    assert long["fidelity_step_cosine_min"] < 0.9, long
    assert long["fidelity_cosine"] > max(0.9, short["fidelity_cosine"]), (short, long)
    assert long["fidelity_norm_error"] < 0.2, long
    assert fp16["fidelity_cosine"] > 0.9999 and fp16["fidelity_norm_error"] < 1e-3, fp16
