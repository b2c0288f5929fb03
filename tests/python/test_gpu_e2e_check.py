"""The CPU-checkable parts of tests/gpu/check_e2e.sh (tests/gpu/e2e_steps.py): which path the check
takes with the stored decision (a real `configs export` document) and what it imports, its reading of
NCCL's log, and its verdict on the CUPTI breakdown."""
import json
import subprocess
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "tests" / "gpu"))
import e2e_steps  # noqa: E402 - from tests/gpu

RULE = {"collective": "any", "min_bytes": 0, "max_bytes": 1 << 62, "algorithm": "tree", "protocol": "any",
        "channels": 0}


def _export(tune_binary, tmp_path, config: dict, gpus_shared: bool, evidence: dict) -> dict:
    """The active decision as `acspeed-tune configs export --active` writes it."""
    document = {"format": "acspeed-decisions", "version": 1, "decisions": [{
        "instance_type": "1xNVIDIA-H200-pcie", "model_signature": "p62-00000000deadbeef", "model_name": "resnet18",
        "precision": "amp", "world_size": 2, "nnodes": 1, "gpus_shared": gpus_shared, "active": True,
        "config": {"version": 2, **config}, "torch_version": "2.11.0", "nccl_version": "2.28.9",
        "cuda_version": "13.0", "batch_size": 32, "evidence": evidence}]}
    (tmp_path / "in.json").write_text(json.dumps(document))
    db = str(tmp_path / "acspeed.db")
    subprocess.run([str(tune_binary), "--db", db, "configs", "import", str(tmp_path / "in.json")], check=True,
                   capture_output=True, timeout=60)
    subprocess.run([str(tune_binary), "--db", db, "configs", "export", "--active", "-o", str(tmp_path / "out.json")],
                   check=True, capture_output=True, timeout=60)
    return json.loads((tmp_path / "out.json").read_text())


def _report(decision_id: int, rule_trial_ok: bool = True) -> dict:
    """The fields of `acspeed-tune report --format json` that the step reads."""
    return {"decision": {"id": decision_id, "config_text": "DDP defaults"}, "trials": [
        {"ordinal": 1, "role": "search", "status": "ok", "config": {"version": 2}, "config_text": "DDP defaults"},
        {"ordinal": 2, "role": "search", "status": "ok" if rule_trial_ok else "failed",
         "config": {"version": 2, "nccl_rules": [RULE]}, "config_text": "NCCL any -> tree/any"},
        {"ordinal": 3, "role": "candidate", "status": "ok", "config": {"version": 2, "nccl_rules": [RULE]},
         "config_text": "NCCL any -> tree/any"}]}


def test_a_kept_default_imports_the_searched_config_with_the_rule_under_the_decisions_key(tune_binary, tmp_path):
    active = _export(tune_binary, tmp_path, {}, True, {"gpus_shared": {"gpus": 1, "ranks_per_node": 2}})
    path, document = e2e_steps.decision(_report(active["decisions"][0]["id"]), active, "tree")
    assert path == "imported"
    (imported,) = document["decisions"]
    assert imported["config"]["nccl_rules"] == [RULE] and imported["active"] and imported["gpus_shared"]
    assert "searched trial 2" in imported["note"]
    # acspeed-tune takes the document, and the imported decision becomes the active one.
    (tmp_path / "import.json").write_text(json.dumps(document))
    db = str(tmp_path / "acspeed.db")
    subprocess.run([str(tune_binary), "--db", db, "configs", "import", str(tmp_path / "import.json")], check=True,
                   capture_output=True, timeout=60)
    listed = json.loads(subprocess.run([str(tune_binary), "--db", db, "configs", "list", "--active", "--json"],
                                       check=True, capture_output=True, text=True, timeout=60).stdout)
    assert [d["config"].get("nccl_rules") for d in listed["decisions"]] == [[RULE]]


def test_a_decision_with_the_rule_is_the_tuned_path(tune_binary, tmp_path):
    active = _export(tune_binary, tmp_path, {"nccl_rules": [RULE]}, True, {"gpus_shared": {"gpus": 1}})
    assert e2e_steps.decision(_report(active["decisions"][0]["id"]), active, "tree") == ("tuned", None)


@pytest.mark.parametrize("shared, evidence, failed_trial, reason", [
    (False, {"gpus_shared": {"gpus": 1}}, False, "not keyed as tuned with shared GPUs"),
    (True, {}, False, "evidence does not say the GPUs were shared"),
    (True, {"gpus_shared": {"gpus": 1}}, True, "no successful searched trial carried an NCCL rule"),
])
def test_the_decision_step_names_what_is_wrong(tune_binary, tmp_path, shared, evidence, failed_trial, reason):
    active = _export(tune_binary, tmp_path, {}, shared, evidence)
    with pytest.raises(ValueError, match=reason):
        e2e_steps.decision(_report(active["decisions"][0]["id"], rule_trial_ok=not failed_trial), active, "tree")


NCCL_LOG = """h200:1:1 [0] NCCL INFO TUNER/Plugin: Using acspeed (v5)
h200:1:1 [0] NCCL INFO Broadcast: 1024 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}
h200:1:1 [0] NCCL INFO TUNER/acspeed: rule 0 (any [0, 4611686018427387904) -> tree/any, NCCL's channels) first applied to allreduce of 4 bytes on communicator 5
h200:1:1 [0] NCCL INFO AllReduce: 4 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..0}
h200:1:1 [0] NCCL INFO AllReduce: 46800000 Bytes -> Algo TREE proto SIMPLE channel{Lo..Hi}={0..1}
"""


def test_nccl_followed_the_rule_only_when_every_later_allreduce_ran_its_algorithm(tmp_path):
    assert e2e_steps.nccl_rule_followed(NCCL_LOG, "tree").endswith("2 allreduce(s) after it, all TREE")
    ring = NCCL_LOG + "h200:1:1 [0] NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n"
    with pytest.raises(ValueError, match="1 of 3 allreduce\\(s\\) after the rule's first use ran as RING, not TREE"):
        e2e_steps.nccl_rule_followed(ring, "tree")
    with pytest.raises(ValueError, match="never logged the first use"):
        e2e_steps.nccl_rule_followed(NCCL_LOG.replace("first applied to", "seen on"), "tree")
    (tmp_path / "rank0.log").write_text(NCCL_LOG)  # the command line the check runs
    done = subprocess.run([sys.executable, str(REPO / "tests/gpu/e2e_steps.py"), "nccl", str(tmp_path / "rank0.log"),
                           "tree"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "all TREE" in done.stdout, done.stderr


def _bench(backend="cupti", comm=0.004, exposed=0.002, wall=0.02) -> dict:
    row = {"percentile": 50.0, "wall_s": wall, "compute_s": 0.015, "comm_s": comm, "exposed_comm_s": exposed}
    return {"profile": {"backend": backend, "rows": [row]}}


def test_the_cupti_breakdown_must_count_nccl_as_communication_below_the_step():
    assert e2e_steps.cupti(_bench()).startswith("backend cupti, p50: step 20.00 ms")
    with pytest.raises(ValueError, match="backend is not cupti"):
        e2e_steps.cupti(_bench(backend="cpu"))
    with pytest.raises(ValueError, match="no NCCL kernel time counted as communication"):
        e2e_steps.cupti(_bench(comm=0.0, exposed=0.0))
    with pytest.raises(ValueError, match="exposed communication is not below the step"):
        e2e_steps.cupti(_bench(exposed=0.02))
    with pytest.raises(ValueError, match="wrote no profile"):
        e2e_steps.cupti({"profile": None})


def test_the_group_step_names_the_implementation_that_ran_the_default_group():
    """From the tuning report (the workers', in its session's versions) and from the benchmark's JSON."""
    report = {"session": {"versions": {"torch": "2.15.0", "process_group": "nccl2"}}}
    assert e2e_steps.process_group(report, "nccl2") == "process group: nccl2"
    with pytest.raises(ValueError, match="ran on nccl2, not nccl$"):
        e2e_steps.process_group(report, "nccl")
    assert e2e_steps.process_group({"versions": {"process_group": "nccl"}}, "nccl") == "process group: nccl"
    with pytest.raises(ValueError, match="ran on not recorded, not nccl"):
        e2e_steps.process_group({"versions": {"torch": "2.11.0"}}, "nccl")
