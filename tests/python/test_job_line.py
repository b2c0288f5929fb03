"""The job's one acspeed line (issue 37 item 4): "no change (reason)" when nothing is applied, the
decision's model name beside its signature (tests/db/resolve_test.cc, test_store_lookup.py), and a
garbage ACSPEED_CONFIG in a real torchrun job: without ACSPEED_STRICT one warning naming the file, the
line and column and what was expected (not the JSON parser's internals), training on; with
ACSPEED_STRICT=1 one line from rank 0 saying it raised, and no Python traceback from any rank."""
import os
import socket
import subprocess
import sys

import pytest

from acspeed import _log
from acspeed.decision import Decision


@pytest.mark.parametrize("source, applied, online, line", [
    ("stored", False, None, "no change (decision #2 stored for box, model mlp (p2-x) keeps DDP defaults)"),
    ("no_store", False, None, "no change (decision #2 stored for box, model mlp (p2-x) keeps DDP defaults)"),
    ("error", False, None, "no change (decision #2 stored for box, model mlp (p2-x) keeps DDP defaults)"),
    ("stored", True, None, "decision #2 stored for box, model mlp (p2-x) keeps DDP defaults"),
    ("no_entry", False, {"configs": []}, "decision #2 stored for box, model mlp (p2-x) keeps DDP defaults"),
    ("disabled", False, None, "decision #2 stored for box, model mlp (p2-x) keeps DDP defaults"),
])
def test_the_line_says_no_change_when_nothing_is_applied_nor_tuned_online(source, applied, online, line):
    found = Decision(source=source, config=None, applied=applied, online=online,
                     message="decision #2 stored for box, model mlp (p2-x) keeps DDP defaults")
    assert found.line() == line


def test_a_strict_error_exits_without_a_traceback_and_says_it_raised():
    error = _log.strict_error("ACSPEED_CONFIG=/x.json is not valid JSON at line 1, column 2")
    assert isinstance(error, SystemExit) and error.code == 1  # Python exits with status 1, printing nothing
    assert str(error) == "acspeed: raised (ACSPEED_STRICT=1): ACSPEED_CONFIG=/x.json is not valid JSON at line 1, column 2"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _job(repo_root, tmp_path, **env):
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
               "--master_addr", "localhost", "--master_port", str(_free_port()),
               str(repo_root / "examples" / "Pytorch_ddp_benchmark.py"), "--model", "tiny_models:mlp",
               "--batch-size", "4", "--steps", "2", "--warmup", "0"]
    env = dict(os.environ, OMP_NUM_THREADS="1", ACSPEED_DB=str(tmp_path / "acspeed.db"),
               PYTHONPATH=os.pathsep.join([str(repo_root / "tests" / "tuner"), os.environ.get("PYTHONPATH", "")]),
               **env)
    return subprocess.run(command, capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("strict", [False, True])
def test_a_garbage_config_file_in_a_torchrun_job(repo_root, tmp_path, strict):
    garbage = tmp_path / "config.json"
    garbage.write_text("this is not json\n")
    done = _job(repo_root, tmp_path, ACSPEED_CONFIG=str(garbage), ACSPEED_STRICT="1" if strict else "0")
    lines = [line for line in done.stderr.splitlines() if line.startswith("acspeed:")]
    reason = (f"ACSPEED_CONFIG={garbage}: config is not valid JSON at line 1, column 2: invalid literal 'th'; "
              f"expected a JSON value (an object, array, string, number, true, false or null)")
    assert "json.exception" not in done.stderr and "using DDP defaults" not in done.stderr, done.stderr
    if not strict:
        assert done.returncode == 0, done.stderr[-3000:]
        assert lines == [f"acspeed: no change ({reason})"], done.stderr[-3000:]
        assert "2 CPUs -- 1M/2C: p50:" in done.stdout
        return
    assert done.returncode != 0 and lines == [f"acspeed: raised (ACSPEED_STRICT=1): {reason}"], done.stderr[-3000:]
    # No rank printed a traceback (acspeed's frames would show); torchrun's own failure summary remains.
    assert "acspeed/apply.py" not in done.stderr and "Pytorch_ddp_benchmark.py\", line" not in done.stderr, \
        done.stderr[-3000:]
    assert "ChildFailedError" in done.stderr or "failed" in done.stderr.lower(), done.stderr[-3000:]
