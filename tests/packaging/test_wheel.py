"""The wheel scripts/setup.sh built (ACSPEED_BUILD_DIR/dist, the same build as `pip wheel .`): what
it holds, what its binaries need at run time, and the package installed from it into fresh virtual
environments: the original quick-start verbatim, the console entry points, `--version`, a non-root
install, an unsupported torch, and `pip uninstall` leaving the user's store alone."""
import hashlib
import importlib.metadata
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

import pytest

from conftest import REPO

TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
# What a bundled binary may need: glibc's libraries, libstdc++ and libgcc_s (torch needs them too).
ALLOWED = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "ld-linux-x86-64.so.2",
           "libstdc++.so.6", "libgcc_s.so.1"}
QUICK_START_LINE = re.compile(r"^2 CPUs -- 1M/2C: p50: \d+\.\d{3}s \d+/s p75: \d+\.\d{3}s \d+/s "
                              r"p90: \d+\.\d{3}s \d+/s p95: \d+\.\d{3}s \d+/s$", re.MULTILINE)


@pytest.fixture(scope="module")
def wheel(build_dir) -> pathlib.Path:
    found = sorted((build_dir / "dist").glob(f"acspeed-*-{TAG}-{TAG}-*.whl"))
    if len(found) != 1:
        pytest.fail(f"expected one acspeed {TAG} wheel in {build_dir / 'dist'}, found {[p.name for p in found]}: "
                    "run scripts/setup.sh")
    return found[0]


@pytest.fixture(scope="module")
def unpacked(wheel, tmp_path_factory) -> pathlib.Path:
    where = tmp_path_factory.mktemp("wheel")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(where)
        for info in archive.infolist():  # extractall drops the modes the wheel records (pip keeps them)
            if info.external_attr >> 16:
                (where / info.filename).chmod((info.external_attr >> 16) & 0o777)
    return where


def _clean_env(**extra) -> dict:
    """The environment of a user's shell: no checkout on PYTHONPATH, no interpreter forced."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "ACSPEED_PYTHON", "VIRTUAL_ENV", "NCCL_TUNER_PLUGIN", "ACSPEED_NCCL_RULES")
           and not key.startswith("PYTEST")}
    env.update(extra)
    return env


# Into a venv that sees the system site-packages: --ignore-installed, or pip finds the acspeed that
# scripts/setup.sh installed into this interpreter "already satisfied" and leaves the venv without it.
SYSTEM_SITE_INSTALL = ("install", "--no-index", "--no-deps", "--ignore-installed")


def _venv(where: pathlib.Path, system_site: bool, python: str = sys.executable) -> pathlib.Path:
    command = [python, "-m", "venv", str(where)] + (["--system-site-packages"] if system_site else [])
    subprocess.run(command, check=True, capture_output=True, env=_clean_env(), timeout=180)
    return where


def _pip(venv: pathlib.Path, *args, env=None, user=None):
    command = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    done = subprocess.run(_as(user) + command, capture_output=True, text=True, timeout=300, env=env or _clean_env())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


def _as(user):
    return [] if user is None else ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"]


def test_wheel_holds_the_core_the_programs_the_plugin_and_the_examples(unpacked):
    package = unpacked / "acspeed"
    assert len(list(package.glob(f"_core.cpython-{TAG[2:]}*.so"))) == 1
    assert len(list(package.glob(f"_probes.cpython-{TAG[2:]}*.so"))) == 1
    assert (package / "libnccl-tuner-acspeed.so").is_file()
    for program in ("acspeed-tune", "acspeed-testbed"):
        assert os.access(package / "bin" / program, os.X_OK), program
    # The examples are the top-level examples/, copied by the build (one source).
    example = package / "examples" / "Pytorch_ddp_benchmark.py"
    assert example.read_bytes() == (REPO / "examples" / "Pytorch_ddp_benchmark.py").read_bytes()
    sources = {p.name for p in (REPO / "python" / "acspeed").glob("*.py")}
    assert sources <= {p.name for p in package.glob("*.py")}
    assert not (package / "_build_info.py").exists()
    info = next(unpacked.glob("acspeed-*.dist-info"))
    entry_points = (info / "entry_points.txt").read_text()
    assert "acspeed-tune = _acspeed_programs:tune" in entry_points
    assert "acspeed-testbed = _acspeed_programs:testbed" in entry_points
    assert (unpacked / "_acspeed_programs.py").is_file()
    metadata = (info / "METADATA").read_text()
    assert "Requires-Python: <3.14,>=3.10" in metadata or "Requires-Python: >=3.10,<3.14" in metadata
    assert re.search(r"^Requires-Dist: torch(<3,>=2\.1|>=2\.1,<3)$", metadata, re.MULTILINE), metadata
    assert not list(unpacked.rglob("torch")), "torch is a dependency, never vendored"


def _elf_files(root: pathlib.Path):
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.read_bytes()[:4] == b"\x7fELF":
            yield path


def test_bundled_binaries_need_only_glibc_libstdcxx_and_libgcc(unpacked):
    needs = {}
    for path in _elf_files(unpacked):
        dynamic = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout
        needs[str(path.relative_to(unpacked))] = sorted(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dynamic))
    listing = "\n".join(f"{name}: {', '.join(libs)}" for name, libs in needs.items())
    print(listing)  # the list, for the log
    assert len(needs) >= 5, listing  # _core, _probes, the plugin, two programs
    for name, libs in needs.items():
        assert set(libs) <= ALLOWED, f"{name} needs {sorted(set(libs) - ALLOWED)}\n{listing}"


def test_bundled_binaries_carry_no_path_of_the_checkout_or_the_build(unpacked, build_dir):
    for path in _elf_files(unpacked):
        data = path.read_bytes()
        for folder in {str(REPO), str(build_dir)}:
            assert folder.encode() not in data, f"{path.name} contains {folder}"


@pytest.fixture(scope="module")
def quick_start_venv(wheel, tmp_path_factory):
    """A fresh venv reusing this interpreter's torch and torchvision (the examples extra), with the
    wheel installed from nothing but the file (no index, no dependency resolution: the venv's own
    older setuptools would hide the one torch's metadata asks for)."""
    venv = _venv(tmp_path_factory.mktemp("qs") / "venv", system_site=True)
    _pip(venv, *SYSTEM_SITE_INSTALL, str(wheel))
    return venv


QUICK_START = """set -e
cd `python -c "import acspeed; print(acspeed.__path__[0]+'/examples/')"`
NP=2
ADDR=localhost
PORT=6006
model=resnet50
python -m torch.distributed.run --nnodes 1 --node_rank 0 --nproc_per_node ${NP} --master_addr ${ADDR} --master_port ${PORT} Pytorch_ddp_benchmark.py --model ${model} --precision amp
"""


@pytest.mark.slow
def test_original_quick_start_verbatim_from_the_installed_wheel(quick_start_venv, tmp_path):
    env = _clean_env(PATH=f"{quick_start_venv / 'bin'}:{os.environ['PATH']}", VIRTUAL_ENV=str(quick_start_venv),
                     ACSPEED_DB=str(tmp_path / "acspeed.db"), OMP_NUM_THREADS="1")
    command = ["bash", "-c", QUICK_START]
    if os.geteuid() == 0:  # its own network namespace, so the fixed port 6006 cannot collide
        command = ["unshare", "--net", "bash", "-c", "ip link set lo up && exec bash -c \"$0\"", QUICK_START]
        env["GLOO_SOCKET_IFNAME"] = "lo"  # the only interface there
    done = subprocess.run(command, capture_output=True, text=True, timeout=420, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert QUICK_START_LINE.search(done.stdout), done.stdout
    assert "acspeed: no acspeed store at" in done.stderr  # `import acspeed` ran, from the venv
    assert str(REPO) not in done.stderr


def test_entry_points_run_the_bundled_programs_with_the_venvs_interpreter(quick_start_venv, tmp_path):
    torch = importlib.metadata.version("torch")
    version = (REPO / "CMakeLists.txt").read_text().split("project(acspeed VERSION ", 1)[1].split()[0]
    python = quick_start_venv / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    out = subprocess.run([str(quick_start_venv / "bin" / "acspeed-tune"), "--version"], capture_output=True,
                         text=True, timeout=60, env=_clean_env(), check=True).stdout
    assert out == f"acspeed-tune {version} (torch {torch}, {python})\n", out
    # The bundled program itself, started directly with no python on PATH, finds the same interpreter.
    program = next(quick_start_venv.glob("lib/python*/site-packages/acspeed/bin/acspeed-tune"))
    direct = subprocess.run([str(program), "--version"], capture_output=True, text=True, timeout=60,
                            env={"PATH": "/nonexistent", "HOME": str(tmp_path)}, check=True).stdout
    assert direct == out
    testbed = subprocess.run([str(quick_start_venv / "bin" / "acspeed-testbed"), "--help"], capture_output=True,
                             text=True, timeout=60, env=_clean_env())
    assert testbed.returncode == 0 and "acspeed-testbed" in testbed.stdout


def test_import_points_nccl_at_the_bundled_plugin(quick_start_venv, tmp_path):
    code = "import os, acspeed; print(os.environ['NCCL_TUNER_PLUGIN']); print(acspeed.__path__[0])"
    env = _clean_env()
    env.pop("NCCL_TUNER_PLUGIN", None)
    plugin, package = subprocess.run([str(quick_start_venv / "bin" / "python"), "-c", code], capture_output=True,
                                     text=True, timeout=120, env=env, cwd=tmp_path, check=True).stdout.split()
    assert plugin == f"{package}/libnccl-tuner-acspeed.so" and pathlib.Path(plugin).is_file()
    assert package.startswith(str(quick_start_venv))


def test_pip_uninstall_removes_package_and_entry_points_and_keeps_the_store(wheel, tmp_path):
    venv = _venv(tmp_path / "venv", system_site=True)
    _pip(venv, *SYSTEM_SITE_INSTALL, str(wheel))
    data = tmp_path / "data"
    env = _clean_env(XDG_DATA_HOME=str(data))
    doc = tmp_path / "decisions.json"
    doc.write_text(json.dumps({"format": "acspeed-decisions", "version": 1, "decisions": [{
        "instance_type": "cpu-2xTest", "model_signature": "p2-00000000deadbeef", "model_name": "resnet18",
        "precision": "amp", "world_size": 2, "nnodes": 1, "active": True,
        "config": {"version": 1, "bucket_cap_mb": 5, "streams": 2}, "torch_version": "2.15.0",
        "batch_size": 32, "speedup": 1.4, "ci_low": 1.2, "ci_high": 1.6}]}))
    subprocess.run([str(venv / "bin" / "acspeed-tune"), "configs", "import", str(doc)], capture_output=True,
                   text=True, timeout=60, env=env, check=True)
    store = data / "acspeed" / "acspeed.db"
    assert store.is_file()
    before = hashlib.sha256(store.read_bytes()).hexdigest()
    package = next(venv.glob("lib/python*/site-packages/acspeed"))
    _pip(venv, "uninstall", "-y", "acspeed")
    assert not package.exists()
    assert not (venv / "bin" / "acspeed-tune").exists() and not (venv / "bin" / "acspeed-testbed").exists()
    assert hashlib.sha256(store.read_bytes()).hexdigest() == before


def test_unsupported_torch_is_named_at_import_not_a_crash(wheel, tmp_path):
    venv = _venv(tmp_path / "venv", system_site=False)
    _pip(venv, "install", "--no-index", "--no-deps", str(wheel))
    site = next(venv.glob("lib/python*/site-packages"))
    # An old torch, as far as acspeed can tell: its metadata says 1.13.0.
    (site / "torch" / "distributed").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("__version__ = '1.13.0'\n")
    (site / "torch" / "distributed" / "__init__.py").write_text("def is_available():\n    return False\n")
    (site / "torch-1.13.0.dist-info").mkdir()
    (site / "torch-1.13.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 1.13.0\n")
    python = str(venv / "bin" / "python")
    warned = subprocess.run([python, "-c", "import acspeed, os; print(os.environ.get('NCCL_TUNER_PLUGIN', 'unset'))"],
                            capture_output=True, text=True, timeout=60, env=_clean_env(), cwd=tmp_path)
    assert warned.returncode == 0, warned.stderr
    assert "supports torch <3,>=2.1; this is torch 1.13.0: not applied" in warned.stderr, warned.stderr
    assert warned.stdout.strip() == "unset"  # nothing was set up
    strict = subprocess.run([python, "-c", "import acspeed"], capture_output=True, text=True, timeout=60,
                            env=_clean_env(ACSPEED_STRICT="1"), cwd=tmp_path)
    assert strict.returncode == 1
    assert "ImportError: acspeed" in strict.stderr and "this is torch 1.13.0" in strict.stderr, strict.stderr


def test_a_wheel_for_another_python_is_refused_by_pip_naming_its_tag(wheel, tmp_path):
    other = next((p for p in sorted(pathlib.Path(sys.base_prefix).parent.glob("3.*/bin/python3"))
                  if not str(p).startswith(sys.base_prefix + "/")), None)
    if other is None:
        pytest.skip("no second Python beside this one to try the wheel on")
    venv = _venv(tmp_path / "venv", system_site=False, python=str(other))
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-index", "--no-deps", str(wheel)],
                          capture_output=True, text=True, timeout=120, env=_clean_env())
    assert done.returncode != 0
    assert f"{wheel.name} is not a supported wheel on this platform" in done.stderr, done.stderr


def test_non_root_user_installs_into_a_venv(wheel):
    """As `nobody` with the system python3 (this interpreter may live in root's home): the wheel
    installs, its entry points run, and they find the venv's interpreter."""
    system_python = shutil.which("python3", path="/usr/bin")
    if os.geteuid() != 0 or system_python is None:
        pytest.skip("needs root (to become nobody) and /usr/bin/python3")
    if subprocess.run([system_python, "-c", f"import sys; sys.exit(sys.version_info[:2] != {sys.version_info[:2]})"]
                      ).returncode != 0:
        pytest.skip(f"/usr/bin/python3 is not Python {sys.version_info.major}.{sys.version_info.minor}")
    home = pathlib.Path(tempfile.mkdtemp(prefix="acspeed-nobody-"))  # pytest's tmp_path is root's alone
    try:
        _install_as_nobody(wheel, home, system_python)
    finally:
        shutil.rmtree(home)


def _install_as_nobody(wheel, home, system_python):
    home.chmod(0o755)
    shutil.copy(wheel, home / wheel.name)
    shutil.chown(home, "nobody", "nogroup")
    env = _clean_env(HOME=str(home))
    subprocess.run(_as(65534) + [system_python, "-m", "venv", str(home / "venv")], check=True, env=env, timeout=180)
    venv = home / "venv"
    _pip(venv, "install", "--no-index", "--no-deps", str(home / wheel.name), env=env, user=65534)
    out = subprocess.run(_as(65534) + [str(venv / "bin" / "acspeed-tune"), "--version"], capture_output=True,
                         text=True, timeout=60, env=env, check=True).stdout
    assert f", {venv}/bin/python{sys.version_info.major}.{sys.version_info.minor})" in out, out
    fingerprint = subprocess.run(_as(65534) + [str(venv / "bin" / "acspeed-tune"), "fingerprint", "--json"],
                                 capture_output=True, text=True, timeout=60, env=env)
    assert fingerprint.returncode == 0 and '"instance_type"' in fingerprint.stdout, fingerprint.stderr


def test_gpu_run_installs_the_carried_wheel_and_packs_the_logs(wheel, tmp_path):
    """tests/gpu/run.sh on a (fake) GPU machine: the wheel goes into a venv of its own, the checks
    run with that venv's interpreter and its installed package, and the logs come back as one archive."""
    gpu = tmp_path / "checkout" / "tests" / "gpu"
    gpu.mkdir(parents=True)
    shutil.copy(REPO / "tests" / "gpu" / "run.sh", gpu / "run.sh")
    (gpu / "check_installed.sh").write_text(
        "#!/usr/bin/env bash\n"
        "echo \"installed=$ACSPEED_GPU_INSTALLED\"\n"
        "cd / && \"$ACSPEED_PYTHON\" -c 'import acspeed, sys; print(\"package\", acspeed.__path__[0]); "
        "print(\"python\", sys.prefix)'\n")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text('#!/usr/bin/env bash\n[[ "$1" == -L ]] && { echo "GPU 0: Fake (UUID: GPU-0)"; exit 0; }\n'
                                     'echo "Fake, 0.0"\n')
    (fake / "nvidia-smi").chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    env = _clean_env(PATH=f"{fake}:{os.environ['PATH']}", OUT=str(out), ACSPEED_WHEEL=str(wheel),
                     ACSPEED_PYTHON=sys.executable)
    env.pop("ACSPEED_GPU_LOG_DIR", None)
    done = subprocess.run(["bash", str(gpu / "run.sh")], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"installed {wheel.name} into" in done.stdout
    archive = out / "acspeed-gpu-logs.tar.gz"
    assert f"logs packed into {archive}" in done.stdout
    with tarfile.open(archive) as packed:
        names = packed.getnames()
        check_log = next(name for name in names if name.endswith("/installed/output.txt"))
        text = packed.extractfile(check_log).read().decode()
        assert any(name.endswith("/install/output.txt") for name in names), names
        assert not any("/venv/" in name for name in names), "the venv is not part of the logs"
    lines = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)
    assert "installed=1" in text
    assert lines["package"] == f"{lines['python']}/lib/python{sys.version_info.major}.{sys.version_info.minor}" \
                               "/site-packages/acspeed", text


def test_programs_run_without_torch(wheel, tmp_path):
    """The entry points never import acspeed (which patches DDP and needs torch): in a venv with no
    torch, acspeed-tune still answers, and says it found no torch."""
    venv = _venv(tmp_path / "venv", system_site=False)
    _pip(venv, "install", "--no-index", "--no-deps", str(wheel))
    out = subprocess.run([str(venv / "bin" / "acspeed-tune"), "--version"], capture_output=True, text=True,
                         timeout=60, env=_clean_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("acspeed-tune ") and "(torch unknown, " in out.stdout, out.stdout
