"""The NCCL and CUDA versions a decision records are torch's own (torch bundles its NCCL, which
differs from the system library the C++ tools could load: here 2.28.9 against torch's), and
`explain` and `import acspeed` compare a decision with torch's, so they agree and a GPU decision is
not refused as stale. `fingerprint`, `explain`, `configs show` and the reports show those versions
the same way (runtime/include/acspeed/job_versions.h): on a CPU job "NCCL: not used (CPU job; torch bundles X)".
Runs without a GPU: the tuner talks to the fake rank 0, explain to a torch patched to report CUDA.
About 20 s."""
import json
import os
import sqlite3
import subprocess
import sys

import pytest
import torch

import acspeed.decision

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH_NCCL = "2.21.5"  # what the patched torch reports
OTHER_NCCL = "2.28.9"  # another major.minor (the system library's here), as a decision of another torch recorded
BUNDLED_NCCL = ".".join(str(part) for part in torch.cuda.nccl.version())  # this CPU machine's torch's


@pytest.fixture()
def tune(tune_binary, isolated_store):
    binary = tune_binary

    def run(*args, **env):
        result = subprocess.run([str(binary), "--db", str(isolated_store), *args], capture_output=True, text=True,
                                timeout=120, env={**os.environ, **env})
        assert result.returncode == 0, f"{args}: {result.stdout}\n{result.stderr}"
        return result
    return run


def test_session_records_the_workers_torch_nccl_not_the_system_one(tune, isolated_store):
    tune("--model", "fake", "--nproc-per-node", "2", "--warmup", "1", "--steps", "3", "--repeats", "3",
         ACSPEED_PYTHON=os.path.join(HERE, "fake_worker.py"), FAKE_WORKER_NCCL=TORCH_NCCL, FAKE_WORKER_CUDA="12.4")
    with sqlite3.connect(isolated_store) as db:
        decisions = db.execute("SELECT nccl_version, cuda_version FROM decisions").fetchall()
        versions = json.loads(db.execute("SELECT versions_json FROM sessions").fetchone()[0])
    assert decisions == [(TORCH_NCCL, "12.4")]
    assert versions["nccl"] == TORCH_NCCL and versions["cuda"] == "12.4"
    assert versions["fingerprint"]["nccl"] == TORCH_NCCL  # the workers' torch's, not the system library's


def test_every_command_shows_a_cpu_jobs_versions_the_same_way(tune, tmp_path):
    """A CPU job uses no NCCL and no CUDA (nothing to check), and every command says what torch
    bundles: fingerprint and explain from this interpreter's torch, configs show and the reports
    from what the workers' torch reported to the session."""
    nccl = f"NCCL: not used (CPU job; torch bundles {BUNDLED_NCCL})"
    cuda = f"CUDA: not used (CPU job; torch bundles {torch.version.cuda})"
    fingerprint = json.loads(tune("fingerprint", "--json").stdout)["details"]
    assert fingerprint["nccl"] == nccl.split(": ", 1)[1] and fingerprint["cuda"] == cuda.split(": ", 1)[1]
    assert nccl.split(": ", 1)[1] in tune("fingerprint").stdout
    explained = tune("explain", "--model-signature", "p1-none", "--world-size", "2").stdout
    assert f"this job's versions (its torch's own): torch {torch.__version__.split('+')[0]}, {nccl}, {cuda}\n" \
        in explained, explained
    hello = json.dumps({"torch_nccl_version": "2.30.7", "torch_cuda_version": "13.2"})
    tune("--model", "fake", "--nproc-per-node", "2", "--warmup", "1", "--steps", "3", "--repeats", "3",
         ACSPEED_PYTHON=os.path.join(HERE, "fake_worker.py"), FAKE_WORKER_HELLO=hello)
    stored = "torch 2.15.0, NCCL: not used (CPU job; torch bundles 2.30.7), CUDA: not used (CPU job; torch bundles 13.2)"
    assert f"tuned under: {stored}; per-device batch" in tune("configs", "show", "1").stdout
    assert f"- Tuned under: {stored}; per-device batch" in tune("report", "--format", "md").stdout
    assert "| nccl | not used (CPU job; torch bundles 2.30.7) |" in tune("report", "--format", "md").stdout


def test_the_session_records_which_process_group_ran_its_trials(tune):
    """torch 2.15's backend="nccl" is nccl2, 2.11's the classic group: the session keeps the
    implementation the workers' hello names, and the report shows it beside the versions."""
    tune("--model", "fake", "--nproc-per-node", "2", "--warmup", "1", "--steps", "3", "--repeats", "3",
         ACSPEED_PYTHON=os.path.join(HERE, "fake_worker.py"), FAKE_WORKER_HELLO=json.dumps({"process_group": "nccl2"}))
    assert "| process\\_group | nccl2 |" in tune("report", "--format", "md").stdout


def test_job_versions_name_the_default_groups_implementation(tmp_path):
    """No process group: "" (what `python -m acspeed.versions` prints); inside a gloo job: "gloo",
    from get_backend_impl where this torch has it."""
    code = ("import json, torch.distributed as dist\n"
            "from acspeed.versions import job_versions\n"
            "before = job_versions()['process_group']\n"
            "dist.init_process_group('gloo', init_method='file://' + __import__('sys').argv[1], rank=0, world_size=1)\n"
            "print(json.dumps([before, job_versions()['process_group']]))\n")
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path / "rendezvous")], capture_output=True, text=True,
                            timeout=60, check=True)
    assert json.loads(result.stdout) == ["", "gloo"]


def _decision(signature, nccl):
    return {"instance_type": "gpu-box", "model_signature": signature, "model_name": "mlp", "precision": "amp",
            "world_size": 2, "nnodes": 1, "active": True, "config": {"version": 1, "bucket_cap_mb": 5},
            "torch_version": torch.__version__, "nccl_version": nccl, "cuda_version": "12.4", "batch_size": 16}


def test_explain_and_import_compare_torchs_nccl(tune, tmp_path, monkeypatch):
    system = OTHER_NCCL
    tuned_here = acspeed.decision.model_signature(torch.nn.Linear(3, 2))
    tuned_by_old_tuner = acspeed.decision.model_signature(torch.nn.Linear(5, 2))
    document = {"format": "acspeed-decisions", "version": 1,
                "decisions": [_decision(tuned_here, TORCH_NCCL), _decision(tuned_by_old_tuner, system)]}
    path = tmp_path / "decisions.json"
    path.write_text(json.dumps(document))
    tune("configs", "import", str(path))

    shim = tmp_path / "python"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{os.path.join(HERE, "torch_on_cuda.py")}" "$@"\n')
    shim.chmod(0o755)
    env = {"ACSPEED_PYTHON": str(shim), "FAKE_TORCH_NCCL": TORCH_NCCL, "FAKE_TORCH_CUDA": "12.4",
           "ACSPEED_INSTANCE_TYPE": "gpu-box"}
    explained = {}
    for signature in (tuned_here, tuned_by_old_tuner):
        out = tune("explain", "--model-signature", signature, "--world-size", "2", "--precision", "amp", **env)
        explained[signature] = out.stdout
        assert f"NCCL {TORCH_NCCL}, CUDA 12.4" in out.stdout, out.stdout
    assert "source: stored" in explained[tuned_here]
    assert "source: version_mismatch" in explained[tuned_by_old_tuner]
    assert f"NCCL {system} (this job runs NCCL {TORCH_NCCL})" in explained[tuned_by_old_tuner]

    # `import acspeed` in a job whose torch is the same: the same verdicts (rank 0's lookup).
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: tuple(int(p) for p in TORCH_NCCL.split(".")))
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setenv("ACSPEED_INSTANCE_TYPE", "gpu-box")
    monkeypatch.setattr(acspeed.decision, "_precision", "amp")
    here = acspeed.decision.lookup(torch.nn.Linear(3, 2), 2)
    old = acspeed.decision.lookup(torch.nn.Linear(5, 2), 2)
    assert here.source == "stored" and here.applied, here
    assert old.source == "version_mismatch" and f"NCCL {system}" in old.message, old
