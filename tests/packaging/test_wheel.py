"""The wheel scripts/setup.sh built (ACSPEED_BUILD_DIR/dist, the same build as `pip wheel .`): what
it holds, what its binaries need at run time, and the package installed from it into fresh virtual
environments: the original quick-start verbatim, the console entry points, `--version`, a non-root
install, an unsupported torch, and `pip uninstall` leaving the user's store alone. And `pip install .`
from a copy of the checkout's tracked files, built and installed by a non-root user."""
import hashlib
import importlib.metadata
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
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


def _pip(venv: pathlib.Path, *args, env=None, prefix=(), cwd=None, timeout=300):
    """pip of the venv, run after the command prefix (e.g. _as_nobody())."""
    command = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    done = subprocess.run([*prefix, *command], capture_output=True, text=True,
                          timeout=timeout, env=env or _clean_env(), cwd=cwd)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


NOBODY = 65534
# Run as root in a mount namespace of its own: shows folder $1 read-only at $2 (when $1 is not empty),
# hides folder $3 behind an empty tmpfs that holds only folder $4 (below $3), at its own path (when
# $3 is not empty), then runs the rest of the command line.
_NOBODYS_VIEW = ('set -e; if [ -n "$1" ]; then mount --bind "$1" "$2"; mount -o remount,bind,ro "$2"; fi; '
                 'if [ -n "$3" ]; then keep=$(mktemp -d); mount --bind "$4" "$keep"; '
                 'mount -t tmpfs -o mode=0755 tmpfs "$3"; mkdir -p "$4"; mount --move "$keep" "$4"; rmdir "$keep"; fi; '
                 'shift 4; exec "$@"')


def _as_nobody(cache=None) -> list:
    """The prefix that runs a command as `nobody` with this interpreter. An interpreter below a
    folder others cannot enter (pyenv's in root's home, mode 0700) is out of nobody's reach: the
    command then runs where that folder shows nothing but the interpreter's prefix (with its
    site-packages: torch, pybind11, scikit-build-core), so nothing else of root's is readable.
    cache: (a folder, where nobody sees it read-only), for the compiler cache (_compiler_cache)."""
    become = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    prefix = pathlib.Path(sys.base_prefix)
    closed = next((folder for folder in reversed(prefix.parents) if not folder.stat().st_mode & 0o001), None)
    if closed is None and cache is None:
        return become
    shown, at = cache or ("", "")
    hidden, kept = (closed, prefix) if closed is not None else ("", "")
    return ["unshare", "--mount", "--propagation", "private", "bash", "-c", _NOBODYS_VIEW, "nobodys-view",
            str(shown), str(at), str(hidden), str(kept), *become]


def _compiler_cache(home: pathlib.Path, source: pathlib.Path):
    """When ccache is installed: the environment that builds `source` through the cache root's own
    builds filled (scripts/setup.sh compiles through it: scripts/compiler-cache.sh), read-only, and
    the (cache folder, where nobody sees it) for _as_nobody. The keys match setup's build: paths
    relative to the checkout (CCACHE_BASEDIR) and to a build folder `build` inside it, the build
    folder's own path left out (CCACHE_NOHASHDIR). Nothing else changes: a miss compiles, as
    without the cache. ({}, None) without ccache or a cache folder."""
    ccache = shutil.which("ccache")
    if ccache is None:
        return {}, None
    folder = subprocess.run([ccache, "--get-config", "cache_dir"], capture_output=True, text=True).stdout.strip()
    if not folder or not os.path.isdir(folder):
        return {}, None
    at, scratch = home / "ccache", home / "ccache-tmp"
    at.mkdir()
    scratch.mkdir()
    shutil.chown(scratch, NOBODY, NOBODY)
    env = {"CMAKE_C_COMPILER_LAUNCHER": ccache, "CMAKE_CXX_COMPILER_LAUNCHER": ccache, "CCACHE_DIR": str(at),
           "CCACHE_READONLY": "1", "CCACHE_NOSTATS": "1", "CCACHE_TEMPDIR": str(scratch),
           "CCACHE_BASEDIR": str(source), "CCACHE_NOHASHDIR": "1", "SKBUILD_BUILD_DIR": "build"}
    return env, (folder, at)


def _nobodys_home() -> pathlib.Path:
    """A folder nobody owns (pytest's tmp_path is root's alone); the caller removes it."""
    if os.geteuid() != 0:
        pytest.skip("needs root (to become nobody)")
    home = pathlib.Path(tempfile.mkdtemp(prefix="acspeed-nobody-"))
    home.chmod(0o755)
    shutil.chown(home, NOBODY, NOBODY)
    return home


def _store_one_decision(acspeed_tune: pathlib.Path, folder: pathlib.Path, env: dict,
                        command_prefix=()) -> pathlib.Path:
    """Imports one decision with the installed acspeed-tune into the store under env's XDG_DATA_HOME;
    returns the store's path."""
    doc = folder / "decisions.json"
    doc.write_text(json.dumps({"format": "acspeed-decisions", "version": 1, "decisions": [{
        "instance_type": "cpu-2xTest", "model_signature": "p2-00000000deadbeef", "model_name": "resnet18",
        "precision": "amp", "world_size": 2, "nnodes": 1, "active": True,
        "config": {"version": 1, "bucket_cap_mb": 5, "streams": 2}, "torch_version": "2.15.0",
        "batch_size": 32, "speedup": 1.4, "ci_low": 1.2, "ci_high": 1.6}]}))
    doc.chmod(0o644)
    done = subprocess.run([*command_prefix, str(acspeed_tune), "configs", "import", str(doc)], capture_output=True,
                          text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    store = pathlib.Path(env["XDG_DATA_HOME"]) / "acspeed" / "acspeed.db"
    assert store.is_file()
    return store


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
    # Every Python file of the package and of its subpackages (acspeed.engine, acspeed._worker).
    source_root = REPO / "python" / "acspeed"
    sources = {p.relative_to(source_root).as_posix() for p in source_root.rglob("*.py")}
    assert {"engine/state.py", "_worker/worker.py"} <= sources
    assert sources <= {p.relative_to(package).as_posix() for p in package.rglob("*.py")}
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


def test_entry_points_run_the_bundled_programs_with_the_venvs_interpreter(quick_start_venv, tmp_path, build_dir):
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
    # What sessions and reports record is the command as the user typed it, not the bundled path.
    db = tmp_path / "report.db"
    subprocess.run([str(build_dir / "tests" / "report" / "make_report_fixture"), str(db)], capture_output=True,
                   timeout=60, check=True)
    doc = json.loads(subprocess.run([str(quick_start_venv / "bin" / "acspeed-tune"), "--db", str(db), "report",
                                     "--format", "json"], capture_output=True, text=True, timeout=60,
                                    env=_clean_env(), check=True).stdout)
    assert doc["command_line"] == ["acspeed-tune", "--db", str(db), "report", "--format", "json"]


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
    env = _clean_env(XDG_DATA_HOME=str(tmp_path / "data"))
    store = _store_one_decision(venv / "bin" / "acspeed-tune", tmp_path, env)
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
    """As `nobody`: the wheel installs into a venv, its entry points run and find the venv's interpreter."""
    home = _nobodys_home()
    try:
        shutil.copy(wheel, home / wheel.name)
        env = _clean_env(HOME=str(home))
        subprocess.run(_as_nobody() + [sys.executable, "-m", "venv", str(home / "venv")], check=True, env=env,
                       timeout=180)
        venv = home / "venv"
        _pip(venv, "install", "--no-index", "--no-deps", str(home / wheel.name), env=env, prefix=_as_nobody())
        out = subprocess.run(_as_nobody() + [str(venv / "bin" / "acspeed-tune"), "--version"], capture_output=True,
                             text=True, timeout=60, env=env, check=True).stdout
        assert f", {venv}/bin/python{sys.version_info.major}.{sys.version_info.minor})" in out, out
        fingerprint = subprocess.run(_as_nobody() + [str(venv / "bin" / "acspeed-tune"), "fingerprint", "--json"],
                                     capture_output=True, text=True, timeout=60, env=env)
        assert fingerprint.returncode == 0 and '"instance_type"' in fingerprint.stdout, fingerprint.stderr
    finally:
        shutil.rmtree(home)


def _copy_tracked_files(destination: pathlib.Path) -> None:
    """What a clone of this checkout would hold, with the working tree's edits: git's tracked files."""
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if source.exists() or source.is_symlink():  # not if deleted in the working tree
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name, follow_symlinks=False)


@pytest.mark.slow
def test_non_root_user_pip_installs_the_source_into_a_venv():
    """docs/reference.md's `pip install .` as `nobody`, from a copy of the checkout's files, into a venv
    reusing this interpreter's torch through --system-site-packages: CMake compiles the whole package
    in pip's build, with no root and no index (--no-build-isolation: scikit-build-core and pybind11
    come from the system site). Then, as nobody, the entry points and `import acspeed` run from the
    venv, and `pip uninstall` removes the package and its entry points and keeps the user's store."""
    home = _nobodys_home()
    try:
        _source_install_as_nobody(home)
    finally:
        shutil.rmtree(home)


def _source_install_as_nobody(home: pathlib.Path) -> None:
    source, venv = home / "acspeed", home / "venv"
    _copy_tracked_files(source)
    subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(source)], check=True)
    env = _clean_env(HOME=str(home), XDG_DATA_HOME=str(home / "data"))
    subprocess.run(_as_nobody() + [sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True,
                   env=env, timeout=180)
    cache_env, cache = _compiler_cache(home, source)
    # A full compile without the cache (6 min on 2 quiet cores, over 30 under a load of 20); a few
    # seconds of linking with the objects setup's build left in it.
    installed = _pip(venv, *SYSTEM_SITE_INSTALL, "--no-build-isolation", ".", env=dict(env, **cache_env),
                     prefix=_as_nobody(cache), cwd=source, timeout=3600)
    assert "Successfully installed acspeed-" in installed.stdout, installed.stdout
    python = venv / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    version = (REPO / "CMakeLists.txt").read_text().split("project(acspeed VERSION ", 1)[1].split()[0]
    out = subprocess.run(_as_nobody() + [str(venv / "bin" / "acspeed-tune"), "--version"], capture_output=True,
                         text=True, timeout=60, env=env, check=True).stdout
    assert out == f"acspeed-tune {version} (torch {importlib.metadata.version('torch')}, {python})\n", out
    code = "import os, acspeed, acspeed._core; print(acspeed.__path__[0]); print(os.environ['NCCL_TUNER_PLUGIN'])"
    imported = subprocess.run(_as_nobody() + [str(venv / "bin" / "python"), "-c", code], capture_output=True,
                              text=True, timeout=120, env=env, cwd=home)
    assert imported.returncode == 0, imported.stderr
    package, plugin = imported.stdout.split()
    assert package == f"{venv}/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages/acspeed"
    assert plugin == f"{package}/libnccl-tuner-acspeed.so" and pathlib.Path(plugin).is_file()
    store = _store_one_decision(venv / "bin" / "acspeed-tune", home, env, _as_nobody())
    assert store.stat().st_uid == NOBODY
    before = hashlib.sha256(store.read_bytes()).hexdigest()
    _pip(venv, "uninstall", "-y", "acspeed", env=env, prefix=_as_nobody())
    assert not pathlib.Path(package).exists()
    assert not (venv / "bin" / "acspeed-tune").exists() and not (venv / "bin" / "acspeed-testbed").exists()
    assert hashlib.sha256(store.read_bytes()).hexdigest() == before


def test_programs_run_without_torch_and_import_names_the_missing_torch(wheel, tmp_path):
    """The entry points never import acspeed (which patches DDP and needs torch): in a venv with no
    torch, acspeed-tune still answers, and says it found no torch; `import acspeed` there is an
    ImportError naming the torch it needs, not a crash inside the extension."""
    venv = _venv(tmp_path / "venv", system_site=False)
    _pip(venv, "install", "--no-index", "--no-deps", str(wheel))
    out = subprocess.run([str(venv / "bin" / "acspeed-tune"), "--version"], capture_output=True, text=True,
                         timeout=60, env=_clean_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("acspeed-tune ") and "(torch unknown, " in out.stdout, out.stdout
    assert out.stderr == "", out.stderr  # no traceback from the torch look-up
    imported = subprocess.run([str(venv / "bin" / "python"), "-c", "import acspeed"], capture_output=True, text=True,
                              timeout=60, env=_clean_env(), cwd=tmp_path)
    assert imported.returncode == 1
    assert re.search(r"^ImportError: acspeed [0-9.]+ needs torch (<3,>=2\.1|>=2\.1,<3); torch is not installed$",
                     imported.stderr, re.MULTILINE), imported.stderr
