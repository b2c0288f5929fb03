"""Shared pytest fixtures. Tests import acspeed from this checkout's python/ folder (not an installed
copy) and find C++ binaries in the build folder named by ACSPEED_BUILD_DIR (default: build/), executables in
its bin/ and the wheel scripts/setup.sh built in its dist/."""
import dataclasses
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "python"))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(REPO / "python")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
# The build folder's programs are not installed in a package, so they would start python3 from PATH:
# they start the interpreter running the tests instead (scripts/setup.sh installs into that one).
os.environ.setdefault("ACSPEED_PYTHON", sys.executable)


def pytest_configure(config):
    """Under pytest-xdist (scripts/test.sh runs the suite on two workers, a test file to a worker), each
    worker gets a temporary directory of its own (TMPDIR), so the tuner's work folders and torchrun's logs
    of one worker's tests are never among the folders another worker's tests count as left behind. It
    is open to every user, as /tmp is: some tests run programs as `nobody`."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        folder = tempfile.mkdtemp(prefix=f"acspeed-tests-{worker}-", dir="/tmp")
        os.chmod(folder, 0o1777)
        os.environ["TMPDIR"] = config._acspeed_tmpdir = folder
        tempfile.tempdir = None  # gettempdir() reads TMPDIR again


def pytest_collection_modifyitems(config, items):
    """The files holding slow tests run first, each file's tests in their order: pytest-xdist hands
    whole files to its workers in this order, so the long files start early and the short ones fill
    the end (scripts/test.sh passes --no-loadscope-reorder, which keeps the order)."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


def pytest_unconfigure(config):
    """The worker's TMPDIR goes; where multiprocessing made its own folder in it (torch does), after
    multiprocessing removes that at exit (its finalizer has exitpriority -100; a lower one runs later),
    so that its removal does not fail on a folder already gone."""
    folder = getattr(config, "_acspeed_tmpdir", None)
    if not folder:
        return
    util = sys.modules.get("multiprocessing.util")
    if util is None:
        shutil.rmtree(folder, ignore_errors=True)
    else:
        util.Finalize(None, shutil.rmtree, args=(folder,), kwargs={"ignore_errors": True}, exitpriority=-101)


@pytest.fixture(scope="session")
def repo_root() -> pathlib.Path:
    return REPO


@pytest.fixture(scope="session")
def build_dir() -> pathlib.Path:
    path = pathlib.Path(os.environ.get("ACSPEED_BUILD_DIR", REPO / "build")).resolve()
    if not path.is_dir():
        pytest.fail(f"build folder {path} does not exist: run scripts/setup.sh (or set ACSPEED_BUILD_DIR)")
    return path


def _built(build_dir: pathlib.Path, name: str) -> pathlib.Path:
    path = build_dir / "bin" / name
    if not path.exists():
        pytest.fail(f"{path} is not built: run `cmake --build {build_dir} --target {name}`")
    return path


@pytest.fixture(scope="session")
def tune_binary(build_dir) -> pathlib.Path:
    """The acspeed-tune this build made."""
    return _built(build_dir, "acspeed-tune")


@pytest.fixture(scope="session")
def testbed_binary(build_dir) -> pathlib.Path:
    """The acspeed-testbed this build made."""
    return _built(build_dir, "acspeed-testbed")


@pytest.fixture()
def isolated_store(tmp_path, monkeypatch) -> pathlib.Path:
    """A fresh store path for this test; ACSPEED_DB points at it."""
    db = tmp_path / "acspeed.db"
    monkeypatch.setenv("ACSPEED_DB", str(db))
    return db


# The real tuning session the tests that only read a tuned store share (tests/tuner/test_tune.py,
# tests/report/test_report_cli.py): acspeed-tune with 2 torchrun ranks (gloo) on
# tests/tuner/tiny_models.py's mlp, 4 configs (bucket 1, 25 MiB x streams 1, 2), grid, seed 7. A stale
# NNODES=3 in the tuner's environment: the workers count nodes by their launch (--nnodes 1).
TUNED_ARGS = ("--model", "tiny_models:mlp", "--bucket-mb", "1,25", "--algorithms", "allreduce", "--streams", "1,2",
              "--strategy", "grid", "--warmup", "1", "--steps", "4", "--repeats", "3", "--nproc-per-node", "2",
              "--seed", "7")


@dataclasses.dataclass(frozen=True)
class TunedStore:
    db: pathlib.Path                 # the store the session wrote: read it, never write it (copy it first)
    tuned: subprocess.CompletedProcess  # acspeed-tune's exit status, stdout and stderr


@pytest.fixture(scope="session")
def tuned_store(tune_binary, tmp_path_factory) -> TunedStore:
    """One real tuning session (TUNED_ARGS) for the whole run: it costs ~15 s of two cores, so the tests
    that only read what a tuner stores share it instead of tuning again."""
    db = tmp_path_factory.mktemp("tuned") / "acspeed.db"
    env = dict(os.environ, ACSPEED_PYTHON=sys.executable, NNODES="3",
               PYTHONPATH=os.pathsep.join([str(REPO / "tests" / "tuner"), os.environ["PYTHONPATH"]]))
    env.pop("ACSPEED_DB", None)
    tuned = subprocess.run([str(tune_binary), "--db", str(db), *TUNED_ARGS], capture_output=True, text=True,
                           timeout=300, env=env)
    if tuned.returncode != 0:
        pytest.fail(f"acspeed-tune {' '.join(TUNED_ARGS)} exited {tuned.returncode}:\n"
                    f"{tuned.stdout[-3000:]}\n{tuned.stderr[-3000:]}")
    return TunedStore(db, tuned)
