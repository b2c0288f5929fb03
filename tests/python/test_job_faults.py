"""Faults inside a training job that imported acspeed (two processes, gloo): a rank that dies in the
middle of the broadcast that gives every rank rank 0's decision, and a store that another process
holds locked past the busy timeout. The survivors never hang: a dead rank ends the others with an
error saying what failed; a locked store is one warning, DDP's defaults, and training goes on.
Costs: one launch of two processes each (about 11 s of CPU, nearly all importing torch)."""
import os
import sqlite3
import subprocess

import pytest

from ddp_harness import run_ranks
from ddp_scenarios import DDP, Captured, acspeed_against_plain, make_model

pytestmark = pytest.mark.slow
DDP_DEFAULT_CAP = 25 * 1024 * 1024


def dies_in_the_broadcast(rank: int, world_size: int, dying: int) -> dict:
    """Rank `dying` exits once the decision's size went out, before the decision itself (the second
    of broadcast_object_list's two broadcasts); the other rank reports how its DDP ended."""
    import torch.distributed.distributed_c10d as c10d  # noqa: PLC0415
    if rank == dying:
        original, calls = c10d.broadcast, []

        def broadcast(*args, **kwargs):
            calls.append(args)
            if len(calls) == 2:
                os._exit(3)
            return original(*args, **kwargs)
        c10d.broadcast = broadcast
    captured = Captured()
    try:
        DDP(make_model())
    except RuntimeError as error:
        return {"error": str(error), "log": captured.take()}
    return {"error": None, "log": captured.take()}


@pytest.mark.parametrize("dying", [0, 1])
def test_a_rank_dying_during_the_decision_broadcast_ends_the_others_with_an_error(dying):
    seen = run_ranks(dies_in_the_broadcast, 2, dying, dying=(dying,), timeout=120)
    assert seen[dying] == 3  # its exit code: it died where it was meant to
    survivor = seen[1 - dying]
    assert survivor["error"] is not None, survivor  # an error, not a hang (the deadline) nor a silent DDP
    if dying == 0:  # rank 1 was waiting for the decision: acspeed's broadcast is what failed
        assert "acspeed: the broadcast of the DDP config from rank 0" in survivor["error"], survivor
        assert "rank 1 did not receive it" in survivor["error"] and "died" in survivor["error"], survivor


def test_a_store_locked_past_the_busy_timeout_warns_once_and_trains_with_ddp_defaults(tune_binary, tmp_path):
    store = tmp_path / "acspeed.db"
    document = tmp_path / "decisions.json"
    document.write_text('{"format": "acspeed-decisions", "version": 1, "decisions": []}')
    subprocess.run([str(tune_binary), "--db", str(store), "configs", "import", str(document)], check=True,
                   capture_output=True, timeout=60)
    holder = sqlite3.connect(store, isolation_level=None)
    try:
        # Another program holds the store exclusively (WAL readers wait only for this kind of lock).
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        seen = run_ranks(acspeed_against_plain, 2, env={"ACSPEED_DB": str(store), "ACSPEED_BUSY_TIMEOUT_MS": "300"},
                         timeout=180)
    finally:
        holder.close()
    for rank_seen in seen:
        assert not rank_seen["hook"] and rank_seen["cap"] == DDP_DEFAULT_CAP and rank_seen["equal"], rank_seen
    assert [level for level, _ in seen[0]["log"]] == ["WARNING"], seen[0]["log"]
    message = seen[0]["log"][0][1]
    assert str(store) in message and "stayed locked by another process past the busy timeout (300 ms" in message
    assert message.startswith("no change ("), message  # issue 37 item 4; it said "...; using DDP defaults"
    assert seen[1]["log"] == []
