"""The CPU-checkable parts of the NCCL plugin's GPU check and of the Python contract:
the setter through ctypes (as `import acspeed` calls it), the GPU worker on gloo, and
tests/gpu/run.sh with fake checks and a fake nvidia-smi: its verdicts, its budgets (each check's
cap, --dry-run, a check that no longer fits, workers' limits below the cap), the ending of a cut-off
check's processes, and its refusal of bad input. tests/packaging/test_gpu_rehearsal.py runs it
through its real install into the real checks."""
import ctypes
import os
import pathlib
import re
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
    """A checkout of run.sh and fake checks: TMP/checkout/tests/gpu (run.sh finds the checkout two up)."""
    gpu = tmp_path / "checkout" / "tests" / "gpu"
    gpu.mkdir(parents=True)
    shutil.copy(repo_root / "tests/gpu/run.sh", gpu / "run.sh")
    for name, body in checks.items():
        (gpu / f"check_{name}.sh").write_text("#!/usr/bin/env bash\n" + body + "\n")
    return gpu


def fake_nvidia_smi(tmp_path, gpus: int) -> str:
    bin_dir = tmp_path / f"bin{gpus}"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    lines = "".join(f'echo "GPU {i}: Fake GPU (UUID: GPU-{i})"\n' for i in range(gpus))
    smi.write_text(textwrap.dedent(f"""\
        #!/usr/bin/env bash
        if [[ "$1" == -L ]]; then
        {lines}exit 0
        fi
        echo "Fake GPU, 1024 MiB, 0.0"
        """))
    smi.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def run_gpu(gpu: pathlib.Path, path: str, tmp_path, *args, **extra) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "ACSPEED_GPU_LOG_DIR", "ACSPEED_WHEEL")}
    env.update(PATH=path, ACSPEED_GPU_LOG_DIR=str(tmp_path / "logs"), **extra)
    return subprocess.run(["bash", str(gpu / "run.sh"), *args], env=env, capture_output=True, text=True, timeout=60)


def test_run_sh_fails_when_any_check_fails_and_reports_each(repo_root, tmp_path):
    gpu = make_gpu_dir(tmp_path, repo_root, {
        "a_pass": 'echo "log dir $ACSPEED_GPU_LOG_DIR budget $ACSPEED_GPU_CHECK_BUDGET"; exit 0',
        "b_skip": "echo 'skipped: no thing'; exit 77",
        "c_fail": "exit 3",
        "d_slow": "sleep 30",
    })
    result = run_gpu(gpu, fake_nvidia_smi(tmp_path, 1), tmp_path, "--checkout", ACSPEED_GPU_CHECK_TIMEOUT="2")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("a_pass") and line.endswith("pass") for line in lines), result.stdout
    assert any(line.startswith("b_skip") and line.endswith("skipped") for line in lines), result.stdout
    assert any(line.startswith("c_fail") and "FAIL (exit 3)" in line for line in lines), result.stdout
    assert any(line.startswith("d_slow") and "FAIL (cut off at its 2s cap)" in line for line in lines), result.stdout
    # Each check gets its own log folder, its cap, and its output is kept there.
    assert (tmp_path / "logs/a_pass/output.txt").read_text().strip() == f"log dir {tmp_path / 'logs/a_pass'} budget 2"


def test_run_sh_passes_when_checks_pass_or_skip(repo_root, tmp_path):
    gpu = make_gpu_dir(tmp_path, repo_root, {"a": "exit 0", "b": "exit 77"})
    result = run_gpu(gpu, fake_nvidia_smi(tmp_path, 1), tmp_path, "--checkout")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all checks passed or skipped" in result.stdout


def test_run_sh_skips_everything_without_a_gpu(repo_root, tmp_path):
    gpu = make_gpu_dir(tmp_path, repo_root, {"would_fail": "exit 1"})
    result = run_gpu(gpu, fake_nvidia_smi(tmp_path, 0), tmp_path, "--checkout")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no GPU here" in result.stdout and "1 check(s) skipped" in result.stdout
    assert not (tmp_path / "logs").exists()


def test_run_sh_reports_a_check_whose_cap_no_longer_fits_as_not_run(repo_root, tmp_path):
    # 18 s in all, 10 kept for the end and 3 for a kill: the first check's 3 s cap fits, and it runs
    # out; then less than its cap is left for the second, which is reported as not run, and the run fails.
    gpu = make_gpu_dir(tmp_path, repo_root, {"a_slow": "sleep 30", "b_never": "echo started; exit 0"})
    result = run_gpu(gpu, fake_nvidia_smi(tmp_path, 1), tmp_path, "--checkout", ACSPEED_GPU_RUN_TIMEOUT="18",
                     ACSPEED_GPU_CHECK_TIMEOUT="3")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("a_slow") and "FAIL (cut off at its 3s cap)" in line for line in lines), result.stdout
    assert any(line.startswith("b_never") and re.search(r"FAIL \(not run: needs 3s, -?\d+s of the run left\)", line)
               for line in lines), result.stdout
    assert "started" not in result.stdout


def test_run_sh_ends_a_cut_off_checks_processes_by_id_before_the_next_check(repo_root, tmp_path):
    # The check starts a process in a session of its own (as torchrun's ranks are), which outlives the
    # check's process group when the check is cut off; run.sh ends it before the next check starts.
    pid_file = tmp_path / "leftover.pid"
    gpu = make_gpu_dir(tmp_path, repo_root, {
        "a_hangs": f"setsid sleep 300 >/dev/null 2>&1 < /dev/null & echo $! > {pid_file}; sleep 30",
        # Gone, or a zombie (what is left of a killed process until whoever adopted it reaps it).
        "b_next": f'if grep -qs "^State:.*[RSD]" "/proc/$(cat {pid_file})/status"; then echo "leftover alive"; '
                  'else echo "leftover gone"; fi',
    })
    result = run_gpu(gpu, fake_nvidia_smi(tmp_path, 1), tmp_path, "--checkout", ACSPEED_GPU_CHECK_TIMEOUT="2")
    pid = int(pid_file.read_text())
    assert result.returncode == 1, result.stdout + result.stderr
    # The leftover is named by id; the check's own sleep may not be reaped yet when run.sh looks (a
    # second id under load).
    ended = re.search(r"a_hangs left \d+ process\(es\) running: ending them by id: ([\d ]+)$", result.stdout, re.M)
    assert ended and str(pid) in ended[1].split(), result.stdout
    assert "leftover gone" in result.stdout and "leftover alive" not in result.stdout, result.stdout


def test_dry_run_prints_each_checks_budget_in_priority_order(repo_root, tmp_path):
    wheel = tmp_path / f"acspeed-0.1.0-{TAG}-{TAG}-linux_x86_64.whl"  # named only: a dry run installs nothing
    wheel.write_bytes(b"")
    gpu = repo_root / "tests" / "gpu"
    result = run_gpu(gpu, os.environ["PATH"], tmp_path, "--dry-run", ACSPEED_WHEEL=str(wheel),
                     ACSPEED_PYTHON=sys.executable)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = re.findall(r"^  (\S+)\s+(\d+)", result.stdout, re.MULTILINE)
    assert rows == [("install", "45"), ("nccl_plugin", "60"), ("e2e", "180"), ("cupti", "45"), ("hook", "45"),
                    ("end+pack", "10")], result.stdout
    total = int(re.search(r"^  total, at most\s+(\d+)$", result.stdout, re.MULTILINE).group(1))
    assert total == 45 + 60 + 180 + 45 + 45 + 5 * 3 + 10 and total <= 400
    assert 'device call: run(command="tests/gpu/run.sh", carry=["dist"], timeout_s=420)' in result.stdout
    assert f"wheel: {wheel}" in result.stdout
    assert not (tmp_path / "logs").exists()
    # A shorter run leaves the check that no longer fits out, and says so.
    short = run_gpu(gpu, os.environ["PATH"], tmp_path, "--dry-run", ACSPEED_WHEEL=str(wheel),
                    ACSPEED_PYTHON=sys.executable, ACSPEED_GPU_RUN_TIMEOUT="250")
    assert re.search(r"^  e2e\s+180  not run: does not fit in the 250s of the run$", short.stdout, re.MULTILINE), \
        short.stdout
    assert re.search(r"^  cupti\s+45  \(\+3s\)$", short.stdout, re.MULTILINE), short.stdout


def test_worker_limits_end_before_the_checks_cap(repo_root):
    def limit(budget: int, want: int, least: int) -> subprocess.CompletedProcess:
        # SECONDS=0: the check's clock starts where the stage asks (bash's own start-up under load took a second once)
        script = f'python=true repo=.; source {repo_root}/tests/gpu/lib.sh; SECONDS=0; worker_limit {want} {least} "stage 2"'
        return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30,
                              env=dict(os.environ, ACSPEED_GPU_CHECK_BUDGET=str(budget)))
    assert limit(60, 120, 10).stdout.strip() == "50"  # cut: its 5 s kill grace ends 5 s before the cap
    assert limit(60, 25, 10).stdout.strip() == "25"   # its own default fits
    short = limit(15, 25, 10)
    assert short.returncode == 1 and short.stdout == ""
    assert short.stderr.strip() == "FAIL: stage 2 needs at least 10s; 5s of the check's 15s cap are left"


def test_the_hook_check_runs_on_every_nccl_process_group_the_torch_has(repo_root, tmp_path):
    """torch 2.15 (this machine's) registers nccl2 beside the classic group: both are run, nccl2
    through TORCH_DIST_USE_NCCL2=1, the classic one through =0. A torch without nccl2 (the lent
    machines' 2.11, stood in for by an interpreter listing its backends) runs the classic one and
    says why not nccl2."""
    def groups(python: str) -> subprocess.CompletedProcess:
        script = f'python={python} repo=.; source {repo_root}/tests/gpu/lib.sh; nccl_process_groups'
        return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    both = groups(sys.executable)
    assert both.returncode == 0 and both.stdout == "1 nccl2\n0 nccl\n", both
    older = tmp_path / "python-torch-2.11"
    older.write_text("#!/bin/sh\necho 'mpi gloo nccl ucc'\n")
    older.chmod(0o755)
    one = groups(str(older))
    assert one.returncode == 0 and one.stdout == "- nccl\n" and one.stderr == "nccl2: not in this torch\n", one


# The lent machines' torch 2.11 as the checks ask it, on a machine whose GPU it cannot use: where the
# installed acspeed lies, its distributed backends (no nccl2), no CUDA device. No torch is imported.
TORCH_211_WITHOUT_CUDA = """#!/usr/bin/env bash
case "$*" in
  *find_spec*) echo "$ACSPEED_GPU_SITE/acspeed" ;;
  *entry_points*) echo "mpi gloo nccl ucc" ;;
  *is_nccl_available*) echo 0 ;;
  *) echo "torch 2.11 stand-in: unexpected arguments: $*" >&2; exit 2 ;;
esac
"""


@pytest.mark.parametrize("check", ["e2e", "hook"])
def test_the_e2e_and_hook_checks_say_which_groups_they_run_and_why_not_nccl2(repo_root, tmp_path, check):
    """Under torch 2.11 both checks run on the classic group only and say "nccl2: not in this torch",
    before they need the GPU (here they then skip: torch sees none). The rehearsal
    (tests/packaging/test_gpu_rehearsal.py) shows the same line naming both groups under torch 2.15."""
    site = tmp_path / "site"
    (site / "bin").mkdir(parents=True)
    (site / "acspeed" / "examples").mkdir(parents=True)
    (site / "acspeed" / "examples" / "Pytorch_ddp_benchmark.py").write_text("")
    python = tmp_path / "python-torch-2.11"
    python.write_text(TORCH_211_WITHOUT_CUDA)
    tune = site / "bin" / "acspeed-tune"
    tune.write_text(f"#!/bin/sh\necho 'acspeed-tune 0.0 (torch 2.11.0, {python})'\n")
    for script in (python, tune):
        script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACSPEED_", "NCCL_", "TORCH_"))}
    env.update(PATH=fake_nvidia_smi(tmp_path, 1), ACSPEED_PYTHON=str(python), ACSPEED_GPU_INSTALLED="1",
               ACSPEED_GPU_SITE=str(site), ACSPEED_GPU_LOG_DIR=str(tmp_path / "logs"))
    done = subprocess.run(["bash", str(repo_root / "tests" / "gpu" / f"check_{check}.sh")], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 77, done.stdout + done.stderr
    assert "NCCL process groups to run: nccl\n" in done.stdout and "nccl2: not in this torch\n" in done.stderr, done
    assert done.stdout.rstrip().endswith(f"skipped: torch under {python} sees no CUDA device or has no NCCL"), done


@pytest.mark.parametrize("setting, value", [("ACSPEED_GPU_CHECK_TIMEOUT", "abc"), ("ACSPEED_GPU_RUN_TIMEOUT", "0"),
                                            ("ACSPEED_GPU_CHECK_TIMEOUT", "-5"), ("ACSPEED_GPU_INSTALL_TIMEOUT", "1.5")])
def test_run_sh_refuses_a_time_limit_that_is_not_a_positive_number(repo_root, tmp_path, setting, value):
    gpu = make_gpu_dir(tmp_path, repo_root, {"a": "exit 0"})
    result = run_gpu(gpu, fake_nvidia_smi(tmp_path, 1), tmp_path, "--checkout", **{setting: value})
    assert result.returncode == 2
    assert result.stderr.strip() == f"tests/gpu: {setting}='{value}' is not a positive number of seconds"
    assert not (tmp_path / "logs").exists()


TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"


@pytest.mark.parametrize("wheels, args, extra, reason", [
    ([], (), {}, r"no {tag} wheel in {dist} \(build it with scripts/gpu_wheel.sh and carry dist/\), or pass "
                 r"--checkout to test the checkout"),
    ([f"acspeed-0.1.0-{TAG}-{TAG}-linux_x86_64.whl", f"acspeed-0.2.0-{TAG}-{TAG}-linux_x86_64.whl"], (), {},
     r"2 {tag} wheels in {dist} \(acspeed-0.1.0-.* acspeed-0.2.0-.*\); keep one or name it with ACSPEED_WHEEL"),
    (["acspeed-0.1.0-cp39-cp39-linux_x86_64.whl"], (), {},
     r"no {tag} wheel in {dist}, only cp39 for .*: build one with scripts/gpu_wheel.sh"),
    (["acspeed-0.1.0-cp39-cp39-linux_x86_64.whl"], (), {"ACSPEED_WHEEL": "{dist}/acspeed-0.1.0-cp39-cp39-linux_x86_64.whl"},
     r"ACSPEED_WHEEL=.*cp39-cp39-linux_x86_64.whl is a cp39 wheel; .* is {tag} \(build one with scripts/gpu_wheel.sh\)"),
    ([], ("--gpu",), {}, r"unknown argument '--gpu' \(accepted: --dry-run, --checkout\)"),
])
def test_run_sh_refuses_bad_input_with_one_line_before_any_gpu_work(repo_root, tmp_path, wheels, args, extra, reason):
    gpu = make_gpu_dir(tmp_path, repo_root, {"a": "echo started; exit 0"})
    dist = gpu.parent.parent / "dist"
    dist.mkdir()
    for name in wheels:
        (dist / name).write_bytes(b"")
    smi = tmp_path / "smi-called"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(f"#!/usr/bin/env bash\ntouch {smi}\necho 'GPU 0: Fake (UUID: GPU-0)'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    result = run_gpu(gpu, f"{bin_dir}{os.pathsep}{os.environ['PATH']}", tmp_path, *args, ACSPEED_PYTHON=sys.executable,
                     **{k: v.format(dist=dist) for k, v in extra.items()})
    assert result.returncode == 2, result.stdout + result.stderr
    assert len(result.stderr.splitlines()) == 1 and result.stdout == "", result.stdout + result.stderr
    assert re.fullmatch("tests/gpu: " + reason.format(tag=TAG, dist=re.escape(str(dist))), result.stderr.strip()), \
        result.stderr
    assert not smi.exists() and not (tmp_path / "logs").exists()
