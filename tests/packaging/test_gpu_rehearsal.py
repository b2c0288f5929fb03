"""The GPU run rehearsed on the CPU machine: tests/gpu/run.sh on a copy of the lent GPU machine's layout,
through its real install into every real check, which must then skip for the one reason that no GPU
is there (torch sees no CUDA device), never earlier.

The device machine's python3 is itself a venv (/opt/torch/.venv) that holds torch on a base Python
without it; a venv made from it with --system-site-packages sees the base's site-packages, so torch is
gone there (why the nested-venv install of before could never have worked). Here: a base made of a copy
of this interpreter's binary and its standard library without site-packages; a venv on it (no pip of
its own) whose .pth exposes this interpreter's site-packages minus any acspeed (torch, pip, pytest...);
that venv as ACSPEED_PYTHON; a stand-in nvidia-smi listing one GPU of either kind the device tool lends
(an H100 or an H200: the rehearsal runs with each, and nothing in tests/gpu may depend on which). The
wheel is the cp311 one the build made (the device gets the cp312 one of scripts/gpu_wheel.sh: the same
files for another Python)."""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile

import pytest

from conftest import REPO
from test_wheel import wheel  # noqa: F401 - the fixture: the wheel the build made

CHECKS = ["nccl_plugin", "e2e", "cupti", "hook"]  # run.sh's priority order
# The kinds the device tool lends (its `kind` names) and what their nvidia-smi says: name, memory.
KINDS = {"nvidia-h100-x1": ("NVIDIA H100 80GB HBM3", "81559 MiB"), "nvidia-h200": ("NVIDIA H200", "143771 MiB")}
NVIDIA_SMI = """#!/usr/bin/env bash
# Stands in for the lent machine's nvidia-smi ({kind}): what run.sh and the checks ask.
case "$*" in
  -L) echo "GPU 0: {name} (UUID: GPU-00000000-0000-0000-0000-000000000000)" ;;
  *--query-gpu=name,memory.total,driver_version*) echo "{name}, {memory}, 580.159.04" ;;
  *--query-gpu=compute_mode*) echo "Default" ;;
  *) echo "nvidia-smi stand-in: unexpected arguments: $*" >&2; exit 2 ;;
esac
"""


def _stand_in(folder: pathlib.Path, kind: str) -> pathlib.Path:
    """A folder holding the stand-in nvidia-smi of `kind`."""
    name, memory = KINDS[kind]
    folder.mkdir()
    (folder / "nvidia-smi").write_text(NVIDIA_SMI.format(kind=kind, name=name, memory=memory))
    (folder / "nvidia-smi").chmod(0o755)
    return folder


def _tree(folder: pathlib.Path) -> list:
    """Every path below `folder`, links not followed: what a run could have added or changed."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture(scope="module")
def device_like(tmp_path_factory) -> dict:
    """A base Python without site-packages and a venv on it exposing torch."""
    root = tmp_path_factory.mktemp("device")
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    real_prefix = pathlib.Path(sys.base_prefix)
    base = root / "base"
    (base / "bin").mkdir(parents=True)
    shutil.copy2(real_prefix / "bin" / version, base / "bin" / version)
    stdlib = base / "lib" / version
    stdlib.mkdir(parents=True)
    for entry in (real_prefix / "lib" / version).iterdir():
        if entry.name != "site-packages":
            (stdlib / entry.name).symlink_to(entry)
    (stdlib / "site-packages").mkdir()
    venv = root / "venv"
    subprocess.run([str(base / "bin" / version), "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    exposed = root / "exposed"  # the site-packages holding torch, minus acspeed
    exposed.mkdir()
    site = pathlib.Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        if not entry.name.lower().startswith(("acspeed", "_acspeed")):
            (exposed / entry.name).symlink_to(entry)
    (venv / "lib" / version / "site-packages" / "device_torch.pth").write_text(f"{exposed}\n")
    return {"root": root, "python": venv / "bin" / "python", "venv": venv, "exposed": exposed}


def _env(bin_dir=None, **extra) -> dict:
    """A shell on the device machine: no checkout on PYTHONPATH, the stand-in nvidia-smi (in `bin_dir`) first."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "ACSPEED_PYTHON", "VIRTUAL_ENV", "ACSPEED_DB", "ACSPEED_GPU_LOG_DIR", "OUT")
           and not k.startswith(("PYTEST", "NCCL_", "ACSPEED_WHEEL"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}" if bin_dir else os.environ["PATH"], **extra)
    return env


def test_the_layout_is_the_device_machines(device_like, tmp_path):
    """The copy is faithful: its python holds torch and no acspeed of its own, and a venv made from it
    with --system-site-packages (the install of before) has no torch."""
    python = str(device_like["python"])
    found = subprocess.run([python, "-c", "import importlib.util as u; import torch; "
                            "print(torch.__file__); print(u.find_spec('acspeed'))"],
                           capture_output=True, text=True, timeout=300, env=_env(), cwd="/")
    assert found.returncode == 0, found.stderr
    torch_file, acspeed = found.stdout.split()
    assert torch_file.startswith(str(device_like["exposed"])) and acspeed == "None", found.stdout
    nested = tmp_path / "nested"
    subprocess.run([python, "-m", "venv", "--without-pip", "--system-site-packages", str(nested)], check=True,
                   timeout=120, env=_env())
    lost = subprocess.run([str(nested / "bin" / "python"), "-c", "import torch"], capture_output=True, text=True,
                          timeout=120, env=_env(), cwd="/")
    assert lost.returncode == 1 and "No module named 'torch'" in lost.stderr, lost.stderr


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_run_sh_installs_the_wheel_and_every_check_skips_only_for_the_missing_gpu(device_like, wheel, tmp_path,
                                                                                    kind):
    out, logs = tmp_path / "out", tmp_path / "logs"
    out.mkdir()
    venv_before, exposed_before = _tree(device_like["venv"]), _tree(device_like["exposed"])
    # The caps are the device machine's (16 idle cores): on a loaded 2-core CI machine an import of
    # torch alone took 60 s. The rehearsal proves the steps, not their speed (test_gpu_scripts.py
    # proves the caps, the not-run report and the ending of a cut-off check with fake checks).
    env = _env(_stand_in(tmp_path / "bin", kind), ACSPEED_PYTHON=str(device_like["python"]), ACSPEED_WHEEL=str(wheel),
               OUT=str(out), ACSPEED_GPU_LOG_DIR=str(logs), HOME=str(tmp_path), ACSPEED_GPU_INSTALL_TIMEOUT="600",
               ACSPEED_GPU_CHECK_TIMEOUT="600", ACSPEED_GPU_RUN_TIMEOUT="3600")
    done = subprocess.run(["bash", str(REPO / "tests" / "gpu" / "run.sh")], capture_output=True, text=True,
                          timeout=3600, env=env, cwd=tmp_path)
    print(done.stdout)  # the rehearsal's output, for the record (pytest -s shows it)
    assert done.returncode == 0, done.stdout + done.stderr
    gpu = f"1 GPU(s): {', '.join(KINDS[kind])}, 580.159.04"
    assert f"tests/gpu: {gpu}\n" in done.stdout

    # The install: the wheel into a folder of the run, imported by the venv's interpreter from there.
    site = re.search(rf"^tests/gpu: installed {re.escape(wheel.name)} into (\S+) \(removed at the end\)$",
                     done.stdout, re.MULTILINE).group(1)
    assert re.search(rf"^acspeed [0-9.]+ at {re.escape(site)}/acspeed$", done.stdout, re.MULTILINE), done.stdout
    assert re.search(rf"^python [0-9.]+ {re.escape(str(device_like['python']))}$", done.stdout, re.MULTILINE)
    assert re.search(r"^torch \S+ CUDA \S+ NCCL unknown \(no CUDA device\)$", done.stdout, re.MULTILINE)

    # Every check ran, in priority order, and skipped for the one reason that a GPU is missing, after
    # finding the installed acspeed (not the checkout's, not one of the interpreter's own).
    rows = re.findall(r"^(\S+)\s+(\d+)s  (.*)$", done.stdout.split("\ncheck ", 1)[1], re.MULTILINE)
    assert [(name, result) for name, _, result in rows] == [("install", "pass")] + [(c, "skipped") for c in CHECKS]
    for check in CHECKS:
        text = (logs / check / "output.txt").read_text()
        assert f"acspeed imported from {site}/acspeed\n" in text, (check, text)
        assert text.rstrip().endswith(f"skipped: torch under {device_like['python']} sees no CUDA device or has "
                                      "no NCCL"), (check, text)
        assert "FAIL" not in text, (check, text)
    nccl = (logs / "nccl_plugin" / "output.txt").read_text()
    assert f"ok: the plugin loads and exports acspeed_nccl_tuner_set_rules: {site}/acspeed/" in nccl, nccl
    e2e = (logs / "e2e" / "output.txt").read_text()
    assert re.search(rf"^ok: acspeed-tune [0-9.]+ \(torch \S+, {re.escape(str(device_like['python']))}\)$", e2e,
                     re.MULTILINE), e2e
    # This torch (2.15) has nccl2 beside the classic group: the end-to-end and hook checks run on both
    # (under torch 2.11 only the classic one: test_gpu_scripts.py)
    for check in ("e2e", "hook"):
        text = (logs / check / "output.txt").read_text()
        assert "NCCL process groups to run: nccl2 nccl\n" in text and "nccl2: not in this torch" not in text, text

    # What comes back: at most 8 files under $OUT, the archive holding every step's log.
    assert sorted(p.name for p in out.iterdir()) == ["acspeed-gpu-logs.tar.gz", "acspeed-gpu-summary.txt"]
    with tarfile.open(out / "acspeed-gpu-logs.tar.gz") as packed:
        names = packed.getnames()
    for step in ["install"] + CHECKS:
        assert f"logs/{step}/output.txt" in names, names
    assert not any("/site/" in name for name in names), "the installed wheel is not part of the logs"
    summary = (out / "acspeed-gpu-summary.txt").read_text().splitlines()
    assert summary[0] == f"gpu: {gpu}"  # the kind, as RESULTS.md records it
    assert summary[2:] == \
        [line for line in done.stdout.split("\ncheck ", 1)[1].splitlines()[1:] if re.match(r"^\S+\s+\d+s  ", line)]

    # Nothing is left in the interpreter's environment, nor of the install.
    assert not pathlib.Path(site).exists()
    assert _tree(device_like["venv"]) == venv_before and _tree(device_like["exposed"]) == exposed_before
