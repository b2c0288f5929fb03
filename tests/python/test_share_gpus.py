"""Ranks sharing GPUs (acspeed.share_gpus, ACSPEED_SHARE_GPUS=1): the device arithmetic, each rank's
NCCL environment, what `import acspeed` does under the setting, and the lookup rule (a decision tuned
with shared GPUs serves only jobs that share them). The GPU is faked: torch.cuda says one device."""
import json
import os
import subprocess
import sys

import pytest
import torch

import acspeed.decision
from acspeed import share_gpus

NCCL = ("NCCL_HOSTID", "NCCL_IB_DISABLE", "NCCL_NVLS_ENABLE", "NCCL_SOCKET_IFNAME")


@pytest.fixture()
def one_gpu(monkeypatch):
    """torch sees one CUDA device; the job's environment is clean of the variables under test."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    for name in NCCL + ("ACSPEED_SHARE_GPUS", "ACSPEED_DISABLE", "ACSPEED_STRICT", "NNODES", "GROUP_WORLD_SIZE"):
        monkeypatch.setenv(name, "")  # recorded, so that what prepare_process() sets is undone afterwards
        monkeypatch.delenv(name)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")


def test_a_ranks_device_is_its_local_rank_modulo_the_gpus():
    assert [share_gpus.device_index(rank, 1) for rank in range(4)] == [0, 0, 0, 0]
    assert [share_gpus.device_index(rank, 2) for rank in range(4)] == [0, 1, 0, 1]
    assert [share_gpus.device_index(rank, 8) for rank in range(8)] == list(range(8))
    with pytest.raises(ValueError, match="at least one GPU, got 0"):
        share_gpus.device_index(0, 0)


def test_each_rank_gets_its_own_nccl_host_identity_and_the_users_settings_win():
    rank0 = share_gpus.nccl_environment(0, 1, "h200-box", {})
    rank1 = share_gpus.nccl_environment(1, 1, "h200-box", {})
    assert rank0 == {"NCCL_HOSTID": "h200-box-acspeed-rank0", "NCCL_IB_DISABLE": "1", "NCCL_NVLS_ENABLE": "0",
                     "NCCL_SOCKET_IFNAME": "lo"}
    assert rank1["NCCL_HOSTID"] == "h200-box-acspeed-rank1"
    # Across nodes the socket transport keeps NCCL's own interface choice.
    assert "NCCL_SOCKET_IFNAME" not in share_gpus.nccl_environment(3, 2, "node-b", {})
    # What the user set is not given again (so it is not overwritten).
    assert share_gpus.nccl_environment(0, 1, "h", {"NCCL_SOCKET_IFNAME": "eth9", "NCCL_HOSTID": "mine"}) == \
        {"NCCL_IB_DISABLE": "1", "NCCL_NVLS_ENABLE": "0"}


def test_prepare_process_sets_the_ranks_nccl_environment_only_under_the_setting(one_gpu, monkeypatch):
    assert not share_gpus.prepare_process()  # no setting: nothing
    assert not any(name in os.environ for name in NCCL)
    monkeypatch.setenv("ACSPEED_SHARE_GPUS", "1")
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth9")
    assert share_gpus.prepare_process()
    import socket  # noqa: PLC0415
    assert os.environ["NCCL_HOSTID"] == f"{socket.gethostname()}-acspeed-rank1"
    assert (os.environ["NCCL_IB_DISABLE"], os.environ["NCCL_NVLS_ENABLE"]) == ("1", "0")
    assert os.environ["NCCL_SOCKET_IFNAME"] == "eth9"  # the user's
    assert share_gpus.device_for(1) == 0


@pytest.mark.parametrize("change", [{"LOCAL_WORLD_SIZE": "1"}, {"ACSPEED_SHARE_GPUS": "0"},
                                    {"ACSPEED_DISABLE": "1"}])
def test_prepare_process_changes_nothing_with_a_gpu_per_rank_or_when_off(one_gpu, monkeypatch, change):
    monkeypatch.setenv("ACSPEED_SHARE_GPUS", "1")
    for name, value in change.items():
        monkeypatch.setenv(name, value)
    assert not share_gpus.prepare_process()
    assert not any(name in os.environ for name in NCCL)


def test_a_bad_setting_is_one_warning_and_no_sharing_or_an_error_when_strict(one_gpu, monkeypatch):
    monkeypatch.setenv("ACSPEED_SHARE_GPUS", "maybe")
    assert not share_gpus.prepare_process()
    assert not any(name in os.environ for name in NCCL)
    monkeypatch.setenv("ACSPEED_STRICT", "1")
    with pytest.raises(ValueError, match="ACSPEED_SHARE_GPUS='maybe' is not a boolean"):
        share_gpus.prepare_process()


def test_the_job_shares_gpus_when_asked_and_its_ranks_outnumber_them(one_gpu, monkeypatch):
    assert not share_gpus.job_shares_gpus(2, 1)  # not asked
    monkeypatch.setenv("ACSPEED_SHARE_GPUS", "1")
    assert share_gpus.job_shares_gpus(2, 1)
    assert not share_gpus.job_shares_gpus(1, 1)
    assert not share_gpus.job_shares_gpus(2, 2)  # one rank per node, one GPU each
    assert share_gpus.device_for(3) == 0
    monkeypatch.delenv("ACSPEED_SHARE_GPUS")
    assert share_gpus.device_for(3) == 3  # as before: the local rank


def test_the_first_process_group_gives_each_rank_its_nccl_settings_before_any_communicator(tmp_path):
    """Set as the job builds its first group, before torch does (acspeed.first_group; test_instance_knobs.py
    shows the order), not at `import acspeed`, which loads nothing of the runtime."""
    code = ("import torch; torch.cuda.is_available = lambda: True; torch.cuda.device_count = lambda: 1\n"
            "import os, json, acspeed\n"
            "import torch.distributed as dist\n"
            f"at_import = [k for k in {NCCL!r} if k in os.environ]\n"
            "dist.init_process_group('gloo', store=dist.HashStore(), rank=0, world_size=1)\n"
            f"print(json.dumps({{'at_import': at_import, **{{k: os.environ.get(k) for k in {NCCL!r}}}}}))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    env.update(ACSPEED_SHARE_GPUS="1", RANK="0", WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", NNODES="1")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen.pop("at_import") == [], seen
    assert seen["NCCL_HOSTID"].endswith("-acspeed-rank0") and seen["NCCL_SOCKET_IFNAME"] == "lo", seen
    assert "ACSPEED_SHARE_GPUS=1: 2 ranks per node share 1 GPU(s) (device = local rank mod 1)" in done.stderr


def _store_with(tune_binary, tmp_path, module, gpus_shared: bool):
    document = {"format": "acspeed-decisions", "version": 1, "decisions": [{
        "instance_type": "shared-box", "model_signature": acspeed.decision.model_signature(module),
        "model_name": "linear", "precision": "fp32", "world_size": 2, "nnodes": 1, "gpus_shared": gpus_shared,
        "active": True, "config": {"version": 2, "bucket_cap_mb": 5}, "torch_version": torch.__version__,
        "nccl_version": "", "cuda_version": "", "batch_size": 8}]}
    path = tmp_path / "decisions.json"
    path.write_text(json.dumps(document))
    store = tmp_path / f"shared-{gpus_shared}.db"
    subprocess.run([str(tune_binary), "--db", str(store), "configs", "import", str(path)], check=True,
                   capture_output=True, timeout=60)
    return store


@pytest.mark.parametrize("tuned_shared", [True, False])
def test_the_lookup_matches_on_whether_the_ranks_share_gpus(one_gpu, monkeypatch, tune_binary, tmp_path,
                                                            tuned_shared):
    module = torch.nn.Linear(4, 4)
    monkeypatch.setenv("ACSPEED_DB", str(_store_with(tune_binary, tmp_path, module, tuned_shared)))
    monkeypatch.setenv("ACSPEED_INSTANCE_TYPE", "shared-box")
    monkeypatch.setenv("ACSPEED_PRECISION", "fp32")
    monkeypatch.setenv("NNODES", "1")
    for sharing in (True, False):
        if sharing:
            monkeypatch.setenv("ACSPEED_SHARE_GPUS", "1")
        else:
            monkeypatch.delenv("ACSPEED_SHARE_GPUS", raising=False)
        found = acspeed.decision.lookup(module, 2)
        if sharing == tuned_shared:
            assert found.source == "stored" and found.applied, found
        else:
            assert found.source == "no_entry" and not found.applied, found
            assert "ranks sharing GPUs" in found.message if sharing else "applies only to jobs that share GPUs" \
                in found.message, found.message
