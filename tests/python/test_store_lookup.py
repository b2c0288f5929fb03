"""The whole lookup path of `import acspeed`: decisions imported into a store with acspeed-tune,
found by (instance type, model signature, precision, world size, nodes), broadcast from rank 0."""
import json
import subprocess

import pytest
import torch

import acspeed.decision
from ddp_harness import run_ranks
from ddp_scenarios import make_model, make_other_model, store_lookup

pytestmark = pytest.mark.slow


def _decision(signature, precision, config, torch_version=torch.__version__):
    return {"instance_type": "test-box", "model_signature": signature, "model_name": "mlp", "precision": precision,
            "world_size": 2, "nnodes": 1, "active": True, "config": {"version": 1, **config},
            "torch_version": torch_version, "nccl_version": "", "cuda_version": "", "batch_size": 16}


def test_stored_decisions_reach_every_rank(tune_binary, tmp_path):
    tune = tune_binary
    store = tmp_path / "acspeed.db"
    signature = acspeed.decision.model_signature(make_model())
    other = acspeed.decision.model_signature(make_other_model())
    document = {"format": "acspeed-decisions", "version": 1, "decisions": [
        _decision(signature, "amp", {"algorithm": "reduce_scatter", "streams": 2, "bucket_cap_mb": 0.5}),
        _decision(other, "amp", {"bucket_cap_mb": 2}, torch_version="1.13.1"),
    ]}
    path = tmp_path / "decisions.json"
    path.write_text(json.dumps(document))
    subprocess.run([str(tune), "--db", str(store), "configs", "import", str(path)], check=True,
                   capture_output=True, timeout=60)
    # ACSPEED_ONLINE=0: the models without a decision (other instance, version mismatch) keep DDP's
    # defaults instead of being tuned online (tests/python/test_online.py covers that).
    seen = run_ranks(store_lookup, 2, env={"ACSPEED_DB": str(store), "ACSPEED_INSTANCE_TYPE": "test-box",
                                           "ACSPEED_ONLINE": "0"})
    for rank_seen in seen:  # rank 1 has no store: it applied rank 0's decision
        assert rank_seen["exact"]["hook"] and rank_seen["exact"]["streams"] == 2
        assert rank_seen["exact"]["cap"] == 1024 * 1024 // 2
        assert rank_seen["other_precision"]["hook"]
        assert not rank_seen["other_instance"]["hook"] and rank_seen["other_instance"]["cap"] == 25 * 1024 * 1024
        assert not rank_seen["version_mismatch"]["hook"] and rank_seen["version_mismatch"]["cap"] == 25 * 1024 * 1024
    assert seen[1]["exact"]["log"] == []
    lines = {name: [line for _, line in value["log"]] for name, value in seen[0].items()}
    assert all(len(value) == 1 for value in lines.values()), lines
    assert lines["exact"][0].startswith("applied decision #1 (bucket 0.5 MiB, reduce_scatter, 2 streams) stored for test-box")
    assert f"model mlp ({signature}), amp" in lines["exact"][0], lines["exact"]  # the name it was tuned as
    assert "no decision for bf16; using amp" in lines["other_precision"][0]
    assert "no decision for bf16; using amp" in lines["configured_precision"][0]
    assert "no stored decision for other-box" in lines["other_instance"][0] and "test-box" in lines["other_instance"][0]
    assert "torch 1.13.1" in lines["version_mismatch"][0] and "re-run acspeed-tune" in lines["version_mismatch"][0]
