"""acspeed sets NCCL's socket variables (an instance knob: NCCL reads them once per process) at the
job's first process group, before torch builds it (so before any communicator), from the store's active
decisions for this instance type and node count; `import acspeed` itself loads nothing of the runtime
and sets nothing. A job's own setting stays, decisions that disagree set nothing, and without CUDA
nothing is looked up. CUDA is simulated as tests/tuner/torch_on_cuda.py does."""
import json
import pathlib
import subprocess
import sys

import torch

REPO = pathlib.Path(__file__).resolve().parents[2]
TORCH_ON_CUDA = REPO / "tests" / "tuner" / "torch_on_cuda.py"
VARIABLES = ("NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD")
# What NCCL would read at the first communicator: the variables when torch's own code starts building
# the first process group (its _new_process_group_helper, wrapped here before acspeed wraps it), and
# what `import acspeed` left. After the first group acspeed's wrapper is gone: torch's runs alone.
PROBE = ("import json, os, sys\n"
         "import torch.distributed as dist\n"
         "from torch.distributed import distributed_c10d as c10d\n"
         "seen = {}\n"
         "helper = c10d._new_process_group_helper\n"
         "def torchs(*args, **kwargs):\n"
         "    if not seen:\n"
         "        seen.update({name: os.environ.get(name) for name in %r})\n"
         "    return helper(*args, **kwargs)\n"
         "c10d._new_process_group_helper = torchs\n"
         "import acspeed\n"
         "at_import = {name: os.environ.get(name) for name in %r}\n"
         "at_import['_core'] = 'acspeed._core' in sys.modules\n"
         "if os.environ.get('SET_AFTER_IMPORT'):\n"
         "    os.environ['NCCL_SOCKET_NTHREADS'] = os.environ['SET_AFTER_IMPORT']\n"
         "group_at_import = dist.is_initialized()\n"
         "dist.init_process_group('gloo', store=dist.HashStore(), rank=0, world_size=1)\n"
         "seen['wrapper_left'] = c10d._new_process_group_helper is not torchs\n"
         "dist.new_group([0])\n"
         "dist.destroy_process_group()\n"
         "print(json.dumps({'at_import': at_import, 'group_at_import': group_at_import, **seen}))\n"
         % (VARIABLES, VARIABLES))


def _decision(signature, sockets, nnodes=2):
    config = {"version": 2}
    if sockets is not None:
        config["nccl_sockets"] = {"threads": sockets[0], "per_thread": sockets[1]}
    return {"instance_type": "gpu-box", "model_signature": signature, "model_name": "m", "precision": "amp",
            "world_size": 2 * nnodes, "nnodes": nnodes, "active": True, "config": config,
            "torch_version": torch.__version__, "nccl_version": "", "cuda_version": "", "batch_size": 16}


def _store(tune, tmp_path, decisions):
    store = tmp_path / "acspeed.db"
    document = tmp_path / "decisions.json"
    document.write_text(json.dumps({"format": "acspeed-decisions", "version": 1, "decisions": decisions}))
    subprocess.run([str(tune), "--db", str(store), "configs", "import", str(document)], check=True,
                   capture_output=True, timeout=60)
    return store


def _import(store, cuda=True, nnodes=2, **extra):
    """`import acspeed` and a first process group in a job of `nnodes` nodes x 2 ranks (rank 0): the
    variables torch saw as it began building that group, whether a group existed at import, and the log."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "python"), "ACSPEED_DB": str(store),
           "ACSPEED_INSTANCE_TYPE": "gpu-box", "FAKE_TORCH_NCCL": "2.21.5", "FAKE_TORCH_CUDA": "12.4",
           "RANK": "0", "WORLD_SIZE": str(2 * nnodes), "LOCAL_WORLD_SIZE": "2", **extra}
    argv = [sys.executable, str(TORCH_ON_CUDA)] if cuda else [sys.executable]
    out = subprocess.run([*argv, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300, check=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    # `import acspeed` loads nothing of the runtime and sets nothing: that happens at the first group
    assert seen.pop("at_import") == {**{name: env.get(name) for name in VARIABLES}, "_core": False}, out.stderr
    assert seen.pop("wrapper_left") is False, out.stderr
    return seen, out.stderr


def test_a_stored_decision_sets_the_sockets_at_the_first_process_group_unless_the_job_set_them(tune_binary, tmp_path):
    store = _store(tune_binary, tmp_path, [_decision("p1-0000000000000001", (2, 4)),
                                            _decision("p1-0000000000000002", (3, 3), nnodes=1)])
    seen, log = _import(store)
    assert seen == {"NCCL_SOCKET_NTHREADS": "2", "NCCL_NSOCKS_PERTHREAD": "4", "group_at_import": False}, log
    assert ("acspeed: NCCL sockets 2x4 from decision #1 for gpu-box with 2 node(s): set NCCL_SOCKET_NTHREADS=2, "
            "NCCL_NSOCKS_PERTHREAD=4 before any communicator") in log
    # The job's own value is a pin: neither variable is touched, and one line says so.
    seen, log = _import(store, NCCL_SOCKET_NTHREADS="8")
    assert seen["NCCL_SOCKET_NTHREADS"] == "8" and seen["NCCL_NSOCKS_PERTHREAD"] is None
    assert log.count("not set, the job set NCCL_SOCKET_NTHREADS=8 itself (a pin: NCCL uses the job's)") == 1, log
    # Also when the job sets it after `import acspeed`, before its first process group.
    seen, log = _import(store, SET_AFTER_IMPORT="6")
    assert seen["NCCL_SOCKET_NTHREADS"] == "6" and seen["NCCL_NSOCKS_PERTHREAD"] is None
    assert "not set, the job set NCCL_SOCKET_NTHREADS=6 itself" in log, log
    # One node: the 2-node decision is not this job's, the 1-node one is.
    seen, _ = _import(store, nnodes=1)
    assert (seen["NCCL_SOCKET_NTHREADS"], seen["NCCL_NSOCKS_PERTHREAD"]) == ("3", "3")
    # No CUDA: nothing looked up, nothing set.
    seen, log = _import(store, cuda=False)
    assert seen["NCCL_SOCKET_NTHREADS"] is None and "NCCL sockets" not in log
    # ACSPEED_NCCL_SOCKETS pins the value over the store's.
    seen, _ = _import(store, ACSPEED_NCCL_SOCKETS="1x2")
    assert (seen["NCCL_SOCKET_NTHREADS"], seen["NCCL_NSOCKS_PERTHREAD"]) == ("1", "2")


def test_decisions_that_disagree_set_nothing_and_say_which(tune_binary, tmp_path):
    store = _store(tune_binary, tmp_path, [_decision("p1-0000000000000001", (2, 4)),
                                            _decision("p1-0000000000000002", (4, 4)),
                                            _decision("p1-0000000000000003", None)])
    seen, log = _import(store)
    assert seen["NCCL_SOCKET_NTHREADS"] is None and seen["NCCL_NSOCKS_PERTHREAD"] is None
    assert ("NCCL sockets: the decisions for gpu-box with 2 node(s) disagree (NCCL's choice #3; 2x4 #1; 4x4 #2): "
            "none set, NCCL chooses") in log, log
