"""`import acspeed` in a DDP job whose ACSPEED_CONFIG names something hostile: a directory, a FIFO
nobody writes to (opening it would block the job forever), a 1 GiB file, bytes that are not UTF-8
(which once reached Python as a UnicodeDecodeError naming neither file nor problem); and a store
whose decision row holds config JSON another tool wrote. Each time: training runs with DDP's
defaults, and rank 0 logs one warning naming what is wrong. Two launches of two processes (about
15 s each)."""
import json
import os
import sqlite3
import subprocess

import pytest

from ddp_harness import run_ranks
import acspeed.decision
import torch
from ddp_scenarios import DDP, Captured, acspeed_against_plain, environment, make_model, plain_ddp, train

pytestmark = pytest.mark.slow
DDP_DEFAULT_CAP = 25 * 1024 * 1024


def hostile(rank: int, world_size: int, cases: dict) -> dict:
    import acspeed._patch  # noqa: PLC0415 - imported in the rank, as a training script does
    captured = Captured()
    base = train(plain_ddp(make_model()), rank)
    captured.take()
    out = {}
    for name, path in cases.items():
        with environment(ACSPEED_CONFIG=path):
            ddp = DDP(make_model())
            out[name] = {"hook": acspeed._patch.state_of(ddp) is not None, "cap": ddp.bucket_bytes_cap,
                         "equal": bool((train(ddp, rank) == base).all()), "log": captured.take()}
    return out


@pytest.fixture(scope="module")
def observed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    fifo = folder / "config.fifo"
    os.mkfifo(fifo)
    huge = folder / "huge.json"
    huge.write_text('{"version": 1}')
    os.truncate(huge, 1 << 30)  # sparse: no disk used
    latin1 = folder / "latin1.json"
    latin1.write_bytes(b'{"version": 1, "algorithm": "r\xe9duction\xff"}')
    cases = {"directory": str(folder), "fifo": str(fifo), "huge": str(huge), "invalid_utf8": str(latin1)}
    return run_ranks(hostile, 2, cases, timeout=180)


@pytest.mark.parametrize("case, says", [("directory", "is a directory"), ("fifo", "is a FIFO"),
                                        ("huge", "more than 64 MiB"), ("invalid_utf8", "not valid JSON")])
def test_hostile_config_file_warns_once_and_trains_with_ddp_defaults(observed, case, says):
    seen = observed[0][case]
    assert not seen["hook"] and seen["cap"] == DDP_DEFAULT_CAP and seen["equal"], seen
    assert [level for level, _ in seen["log"]] == ["WARNING"], seen["log"]
    message = seen["log"][0][1]
    # "no change (reason)": the job's line when nothing is applied (issue 37 item 4; it said "...; using DDP defaults").
    assert message.startswith("no change (ACSPEED_CONFIG=") and says in message, message
    assert observed[1][case]["log"] == []  # rank 0 speaks
    assert not observed[1][case]["hook"] and observed[1][case]["equal"]


def test_garbage_config_row_in_the_store_warns_once_and_trains_with_ddp_defaults(tune_binary, tmp_path):
    store = tmp_path / "acspeed.db"
    decision = {"instance_type": "test-box", "model_signature": acspeed.decision.model_signature(make_model()),
                "model_name": "mlp", "precision": "amp", "world_size": 2, "nnodes": 1, "active": True,
                "config": {"version": 1, "algorithm": "reduce_scatter"}, "torch_version": torch.__version__,
                "nccl_version": "", "cuda_version": "", "batch_size": 16}
    document = tmp_path / "decisions.json"
    document.write_text(json.dumps({"format": "acspeed-decisions", "version": 1, "decisions": [decision]}))
    subprocess.run([str(tune_binary), "--db", str(store), "configs", "import", str(document)], check=True,
                   capture_output=True, timeout=60)
    with sqlite3.connect(store) as db:  # what another tool might leave there
        db.execute("UPDATE decisions SET config_json = ?", (b"{\"version\": 1, \"streams\": \"\xff\"",))
    seen = run_ranks(acspeed_against_plain, 2, env={"ACSPEED_DB": str(store), "ACSPEED_INSTANCE_TYPE": "test-box",
                                          "ACSPEED_PRECISION": "amp"}, timeout=180)
    for rank_seen in seen:
        assert not rank_seen["hook"] and rank_seen["cap"] == DDP_DEFAULT_CAP and rank_seen["equal"], rank_seen
    assert [level for level, _ in seen[0]["log"]] == ["WARNING"], seen[0]["log"]
    message = seen[0]["log"][0][1]
    # "no change (...)": issue 37 item 4 (it said "not applied, DDP defaults").
    assert message.startswith("no change (decision #1 ") and "configs delete 1" in message, message
    assert "\\xff" in message  # the stored bytes, escaped: Python could not carry them raw
    assert seen[1]["log"] == []
