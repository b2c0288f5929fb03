"""examples/Pytorch_ddp_benchmark.py under torchrun with 2 processes prints the benchmark line in the
original format and writes its JSON; launched exactly like the documented command (tiny sizes)."""
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
    p50 = record["percentiles"]["p50"]
    assert p50["samples_per_s_per_device"] == pytest.approx(2 / p50["step_time_s"])
    assert all(key.startswith(("ACSPEED_", "NCCL_", "CUDA_")) for key in record["environment"])
    # The JSON file is never written over unless asked.
    again = subprocess.run([sys.executable, str(repo_root / "examples" / "Pytorch_ddp_benchmark.py"), "--json", str(out)],
                           capture_output=True, text=True, timeout=120, env=env)
    assert again.returncode != 0 and "--overwrite" in again.stderr
