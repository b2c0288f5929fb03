"""Shared pytest fixtures. Tests import acspeed from this checkout's python/ folder (not an installed
copy) and find C++ binaries in the build folder named by ACSPEED_BUILD_DIR (default: build/), executables in
its bin/ and the wheel scripts/setup.sh built in its dist/."""
import os
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "python"))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(REPO / "python")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
# The build folder's programs are not installed in a package, so they would start python3 from PATH:
# they start the interpreter running the tests instead (scripts/setup.sh installs into that one).
os.environ.setdefault("ACSPEED_PYTHON", sys.executable)


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
