"""The CPU-checkable parts of the NCCL plugin's GPU check and of the Python contract:
the setter through ctypes (as `import acspeed` calls it), the GPU worker on gloo, and
tests/gpu/run.sh's verdicts with fake checks and a fake nvidia-smi."""
import ctypes
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import textwrap

import pytest

CONFIG = '{"version": 1, "nccl_rules": [{"collective": "allreduce", "max_bytes": 65536, "algorithm": "ring", "protocol": "ll", "channels": 2}]}'


@pytest.fixture(scope="module")
def plugin_path(repo_root) -> pathlib.Path:
    path = repo_root / "python" / "acspeed" / "libnccl-tuner-acspeed.so"
    if not path.is_file():
        pytest.fail(f"{path} is not built: run `ninja -C build acspeed_nccl_tuner`")
    return path


def test_setter_through_ctypes_accepts_a_config_and_refuses_a_bad_one(plugin_path, tmp_path, capfd):
    # A private copy: a fresh instance of the plugin, as in a new training process.
    copy = tmp_path / plugin_path.name
    shutil.copy(plugin_path, copy)
    lib = ctypes.CDLL(str(copy))
    lib.acspeed_nccl_tuner_set_rules.argtypes = [ctypes.c_char_p]
    lib.acspeed_nccl_tuner_set_rules.restype = ctypes.c_int
    assert lib.acspeed_nccl_tuner_set_rules(CONFIG.encode()) == 0
    assert lib.acspeed_nccl_tuner_set_rules(b'{"version": 1, "nccl_rules": [{"protocol": "ll256"}]}') == 1
    assert lib.acspeed_nccl_tuner_set_rules(None) == 1
    # No NCCL communicator yet, so no NCCL logger: the reasons go to stderr as acspeed warnings.
    err = capfd.readouterr().err
    assert "TUNER/acspeed: acspeed_nccl_tuner_set_rules refused the config" in err
    assert "'ll256' is not one of" in err
    assert "acspeed_nccl_tuner_set_rules(NULL) refused" in err


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_gpu_worker_runs_both_phases_on_gloo(repo_root, plugin_path, tmp_path):
    rules_b = tmp_path / "rules_b.json"
    rules_b.write_text(CONFIG)
    port = free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), NCCL_TUNER_PLUGIN=str(plugin_path), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen(
            [sys.executable, str(repo_root / "tests/gpu/nccl_plugin_ddp.py"), "--device", "cpu",
             "--plugin", str(plugin_path), "--switch-to", str(rules_b), "--steps", "1"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=180)[0])
    finally:
        for proc in procs:
            proc.kill()
    for rank, (proc, out) in enumerate(zip(procs, outputs)):
        assert proc.returncode == 0, out
        assert f"ACSPEED_CHECK rank {rank}: rules switched through acspeed_nccl_tuner_set_rules" in out
        assert f"ACSPEED_CHECK rank {rank}: phase B DDP step 0 loss" in out
        assert f"ACSPEED_CHECK rank {rank}: done" in out


def make_gpu_dir(tmp_path, repo_root, checks: dict) -> pathlib.Path:
    gpu = tmp_path / "gpu"
    gpu.mkdir()
    shutil.copy(repo_root / "tests/gpu/run.sh", gpu / "run.sh")
    for name, body in checks.items():
        (gpu / f"check_{name}.sh").write_text("#!/usr/bin/env bash\n" + body + "\n")
    return gpu


def fake_nvidia_smi(tmp_path, gpus: int) -> str:
    bin_dir = tmp_path / f"bin{gpus}"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    lines = "".join(f'echo "GPU {i}: Fake H200 (UUID: GPU-{i})"\n' for i in range(gpus))
    smi.write_text(textwrap.dedent(f"""\
        #!/usr/bin/env bash
        if [[ "$1" == -L ]]; then
        {lines}exit 0
        fi
        echo "Fake H200, 0.0"
        """))
    smi.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def run_gpu(gpu: pathlib.Path, path: str, tmp_path, **extra) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "ACSPEED_GPU_LOG_DIR")}
    env.update(PATH=path, ACSPEED_GPU_LOG_DIR=str(tmp_path / "logs"), **extra)
    return subprocess.run(["bash", str(gpu / "run.sh")], env=env, capture_output=True, text=True, timeout=60)


def test_run_sh_fails_when_any_check_fails_and_reports_each(repo_root, tmp_path):
    gpu = make_gpu_dir(tmp_path, repo_root, {
        "a_pass": 'echo "log dir $ACSPEED_GPU_LOG_DIR"; exit 0',
        "b_skip": "echo 'skipped: no thing'; exit 77",
        "c_fail": "exit 3",
        "d_slow": "sleep 30",
    })
    result = run_gpu(gpu, fake_nvidia_smi(tmp_path, 1), tmp_path, ACSPEED_GPU_CHECK_TIMEOUT="2")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("a_pass") and line.endswith("pass") for line in lines), result.stdout
    assert any(line.startswith("b_skip") and line.endswith("skipped") for line in lines), result.stdout
    assert any(line.startswith("c_fail") and "FAIL (exit 3)" in line for line in lines), result.stdout
    assert any(line.startswith("d_slow") and "timed out after 2s" in line for line in lines), result.stdout
    # Each check gets its own log folder and its output is kept there.
    assert (tmp_path / "logs/a_pass/output.txt").read_text().strip() == f"log dir {tmp_path / 'logs/a_pass'}"


def test_run_sh_passes_when_checks_pass_or_skip(repo_root, tmp_path):
    gpu = make_gpu_dir(tmp_path, repo_root, {"a": "exit 0", "b": "exit 77"})
    result = run_gpu(gpu, fake_nvidia_smi(tmp_path, 1), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all checks passed or skipped" in result.stdout


def test_run_sh_skips_everything_without_a_gpu(repo_root, tmp_path):
    gpu = make_gpu_dir(tmp_path, repo_root, {"would_fail": "exit 1"})
    result = run_gpu(gpu, fake_nvidia_smi(tmp_path, 0), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no GPU here" in result.stdout and "1 check(s) skipped" in result.stdout
    assert not (tmp_path / "logs").exists()


def test_run_sh_stops_starting_checks_when_the_runs_time_is_spent(repo_root, tmp_path):
    # 15 s in all, 10 kept for the packing: the first check gets what is left of 5 s and runs out;
    # after it no second is left, so the next check is reported as not run, and the run fails.
    gpu = make_gpu_dir(tmp_path, repo_root, {"a_slow": "sleep 30", "b_never": "echo started; exit 0"})
    result = run_gpu(gpu, fake_nvidia_smi(tmp_path, 1), tmp_path, ACSPEED_GPU_RUN_TIMEOUT="15")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("a_slow") and "FAIL (timed out after " in line for line in lines), result.stdout
    assert any(line.startswith("b_never") and "FAIL (not run: the 15s of the run were spent)" in line
               for line in lines), result.stdout
    assert "started" not in result.stdout


@pytest.mark.parametrize("setting, value", [("ACSPEED_GPU_CHECK_TIMEOUT", "abc"), ("ACSPEED_GPU_RUN_TIMEOUT", "0"),
                                            ("ACSPEED_GPU_CHECK_TIMEOUT", "-5")])
def test_run_sh_refuses_a_time_limit_that_is_not_a_positive_number(repo_root, tmp_path, setting, value):
    gpu = make_gpu_dir(tmp_path, repo_root, {"a": "exit 0"})
    result = run_gpu(gpu, fake_nvidia_smi(tmp_path, 1), tmp_path, **{setting: value})
    assert result.returncode == 2
    assert result.stderr.strip() == f"tests/gpu: {setting}='{value}' is not a positive number of seconds"
    assert not (tmp_path / "logs").exists()
