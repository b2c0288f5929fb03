"""The trial worker's modes for the step model (tuner/include/acspeed/tuner/step_model.h), with real torchrun ranks (2
processes, gloo): "compute" runs the bare model without communication and times forward and the
optimizer apart (and the hello describes the gradients' shapes); "hooked" runs DDP's defaults through acspeed's comm hook so the probe reports the
buckets' count and bytes, which plain DDP (no hook) does not. And the convergence guard's
gradient-fidelity window and loss trajectory (tuner/include/acspeed/tuner/convergence_guard.h), measured only when a
request asks."""
import os
import pathlib
import socket
import subprocess
import sys

import pytest

from acspeed._worker import protocol

HERE = pathlib.Path(__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Workers:
    """Two worker ranks on the tiny MLP behind a control socket; calling it sends one trial and returns
    its result. A failed trial ends the workers (acspeed._worker.worker's contract): the next trial starts new
    ones, so the tests sharing them may run in any order."""

    def __init__(self, folder: pathlib.Path):
        self.path = str(folder / "control.sock")
        self.log = folder / "workers.log"  # a file, not a pipe nobody reads: a full pipe would block the ranks
        self.ranks = None
        self.start()

    def start(self):
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if os.path.exists(self.path):
            os.unlink(self.path)
        server.bind(self.path)
        server.listen(1)
        server.settimeout(120)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ["PYTHONPATH"]]))
        with open(self.log, "a", encoding="utf-8") as log:
            self.ranks = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                                           f"--master_port={_free_port()}", "-m", "acspeed._worker.worker", "--model",
                                           "tiny_models:mlp", "--batch-size", "4", "--trajectory-steps", "8", "--control",
                                           self.path], env=env,
                                          stdout=subprocess.DEVNULL, stderr=log)
        try:
            self.connection, _ = server.accept()
        finally:
            server.close()
        self.connection.settimeout(120)
        self.reader = self.connection.makefile("r")
        hello = protocol.decode(self.reader.readline())
        assert hello["type"] == "hello", hello
        self.probe, self.param_bytes, self.gradients = hello["probe"], hello["param_bytes"], hello["gradients"]

    def __call__(self, ident, mode=None, fidelity_steps=None, trajectory_steps=None, **config):
        if self.ranks.poll() is not None:
            self.start()
        request = protocol.trial(ident, dict({"version": 2}, **config), warmup=1, steps=3, mode=mode,
                                 fidelity_steps=fidelity_steps, trajectory_steps=trajectory_steps)
        self.connection.sendall(protocol.encode(request))
        result = protocol.decode(self.reader.readline())
        if result["status"] != "ok":
            self.ranks.wait(timeout=60)  # it ends these workers
        return result

    def stop(self):
        try:
            self.connection.sendall(protocol.encode(protocol.stop()))
            self.ranks.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            pass  # a failed trial ended the workers already
        finally:
            if self.ranks.poll() is None:
                self.ranks.kill()
                self.ranks.wait()


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    """One launch of two worker ranks for the module's trials (a launch costs 3-4 s of two cores)."""
    workers = _Workers(tmp_path_factory.mktemp("worker"))
    try:
        yield workers
    finally:
        workers.stop()


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


def test_gradient_as_bucket_view_runs_the_same_numerics(worker):
    plain = worker(1, bucket_cap_mb=1)
    viewed = worker(2, bucket_cap_mb=1, gradient_as_bucket_view=True)  # the tuner's --grad-as-bucket-view
    assert plain["status"] == "ok" and viewed["status"] == "ok", (plain, viewed)
    # The same weights and batch: gradients that are views into the buckets reduce to the same losses.
    assert viewed["losses"] == pytest.approx(plain["losses"], rel=1e-6), (plain["losses"], viewed["losses"])


def test_hooked_mode_reports_the_buckets_that_plain_ddp_does_not(worker):
    if not worker.probe:
        pytest.skip("the probes (acspeed._probes) are not built")
    plain = worker(1)
    hooked = worker(2, mode="hooked")
    assert plain["status"] == "ok" and hooked["status"] == "ok", (plain, hooked)
    assert "bucket_count" not in plain  # DDP's built-in allreduce: no hook reports buckets
    assert hooked["bucket_count"] >= 1 and hooked["comm_s"] > 0
    assert hooked["bucket_bytes"] == worker.param_bytes  # every gradient, uncompressed


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


def test_a_trajectory_runs_from_the_initial_weights_compressed_from_its_first_step(worker):
    plain, again = worker(1, trajectory_steps=8), worker(2, trajectory_steps=8)
    # PowerSGD's start step 10 would leave 8 steps uncompressed: the trajectory compresses from step 0.
    psgd = worker(3, trajectory_steps=8, compression="powersgd", powersgd_rank=1, powersgd_start_step=10)
    untouched = worker(4)
    assert all(r["status"] == "ok" for r in (plain, again, psgd, untouched)), (plain, again, psgd, untouched)
    assert len(plain["trajectory"]) == 8 and "trajectory" not in untouched
    assert again["trajectory"] == pytest.approx(plain["trajectory"], rel=1e-6)  # same weights, same batches
    assert psgd["trajectory"][0] == pytest.approx(plain["trajectory"][0], rel=1e-6)  # before any update
    assert psgd["trajectory"][1:] != pytest.approx(plain["trajectory"][1:], rel=1e-6)
    # The batches are made at start-up (--trajectory-steps 8): a longer trajectory fails, naming why.
    longer = worker(5, trajectory_steps=9)
    assert longer["status"] == "failed" and "the workers made 8 batches" in longer["error"], longer


def test_an_unknown_mode_fails_the_trial_naming_it(worker):
    result = worker(1, mode="teleport")
    assert result["status"] == "failed" and "'teleport'" in result["error"], result
