"""examples/Pytorch_ddp_benchmark.py under torchrun with 2 processes prints the benchmark line in the
original format and writes its JSON; launched exactly like the documented command (tiny sizes)."""
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

LINE = re.compile(r"^2 CPUs -- 1M/2C: p50: \d+\.\d{3}s \d+/s p75: \d+\.\d{3}s \d+/s "
                  r"p90: \d+\.\d{3}s \d+/s p95: \d+\.\d{3}s \d+/s$")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_benchmark_line_under_torchrun(repo_root, tmp_path, isolated_store):
    out = tmp_path / "bench.json"
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--node_rank", "0",
               "--nproc_per_node", "2", "--master_addr", "localhost", "--master_port", str(_free_port()),
               str(repo_root / "examples" / "Pytorch_ddp_benchmark.py"), "--model", "resnet18", "--precision", "amp",
               "--batch-size", "2", "--image-size", "32", "--warmup", "1", "--steps", "4", "--json", str(out)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert len(lines) == 1 and LINE.match(lines[0]), done.stdout
    assert "acspeed: no acspeed store at" in done.stderr  # the one line `import acspeed` logs on rank 0
    record = json.loads(out.read_text())
    assert record["version"] == 1 and record["line"] == lines[0]
    assert len(record["step_times_s"]) == 4 and record["world_size"] == 2 and record["acspeed"]
    assert record["versions"]["process_group"] == "gloo"  # what ran the default group (check_e2e.sh reads it)
    p50 = record["percentiles"]["p50"]
    assert p50["samples_per_s_per_device"] == pytest.approx(2 / p50["step_time_s"])
    assert all(key.startswith(("ACSPEED_", "NCCL_", "CUDA_")) for key in record["environment"])
    # The JSON file is never written over unless asked.
    again = subprocess.run([sys.executable, str(repo_root / "examples" / "Pytorch_ddp_benchmark.py"), "--json", str(out)],
                           capture_output=True, text=True, timeout=120, env=env)
    assert again.returncode != 0 and "--overwrite" in again.stderr


def test_warmup_covers_powersgds_start_step(repo_root, tmp_path, isolated_store):
    """With a config that compresses from step 3 (PowerSGD), the default warm-up (2 on CPU) grows to
    the start step plus 2, and one line before the benchmark line (format unchanged) says so."""
    config = tmp_path / "powersgd.json"
    config.write_text(json.dumps({"version": 2, "compression": "powersgd", "powersgd_rank": 1,
                                  "powersgd_start_step": 3}))
    out = tmp_path / "bench.json"
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--node_rank", "0",
               "--nproc_per_node", "2", "--master_addr", "localhost", "--master_port", str(_free_port()),
               str(repo_root / "examples" / "Pytorch_ddp_benchmark.py"), "--model", "tiny_models:mlp",
               "--batch-size", "4", "--steps", "3", "--json", str(out)]
    env = dict(os.environ, OMP_NUM_THREADS="1", ACSPEED_CONFIG=str(config),
               PYTHONPATH=os.pathsep.join([str(repo_root / "tests" / "tuner"), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert len(lines) == 2 and LINE.match(lines[1]), done.stdout
    assert lines[0].startswith("warm-up: 5 steps, past step 3 from which the applied config compresses"), lines[0]
    record = json.loads(out.read_text())
    assert record["warmup"] == 5 and record["warmup_note"] == lines[0] and record["line"] == lines[1]


def _benchmark_module(repo_root):
    spec = importlib.util.spec_from_file_location("ddp_benchmark", repo_root / "examples" / "Pytorch_ddp_benchmark.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_explicit_warmup_wins_with_a_note(repo_root):
    bench = _benchmark_module(repo_root)
    # Not given: the warm-up covers the start step plus STEADY_STATE_STEPS.
    assert bench.steady_warmup(2, False, 10, 10)[0] == 12
    # Given and short of the start step: kept, and the note counts the uncompressed timed steps.
    warmup, note = bench.steady_warmup(2, True, 10, 10)
    assert warmup == 2
    assert note.startswith("note: --warmup 2: 8 of the 10 timed steps ran before compression started"), note
    assert bench.steady_warmup(4, True, 10, 3)[1].startswith("note: --warmup 4: 3 of the 3 timed steps")
    # Given and past the start step, or a config that compresses from the first step or not at all: no line.
    assert bench.steady_warmup(12, True, 10, 10) == (12, None)
    assert bench.steady_warmup(2, False, 0, 10) == (2, None)
