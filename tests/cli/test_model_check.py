"""`acspeed-tune --dry-run` runs the workers' own check of --model and --data (python -m
acspeed._worker.check, without torchrun): a model or data that cannot be used exits 2 with one line
naming what was found; a relative path/to/file.py:name or pkg.module:name resolves against the folder
acspeed-tune was started in, which the workers get as --start-dir. A real tuning session on a model
from a file (slow) shows the workers resolve it the same way."""
import os
import pathlib
import shutil
import sqlite3
import subprocess
import sys

import pytest

NET = pathlib.Path(__file__).resolve().parent.parent / "support" / "user_nets.py"


@pytest.fixture()
def project(tmp_path):
    """A user's folder with nets/net.py, which is on no PYTHONPATH."""
    (tmp_path / "proj" / "nets").mkdir(parents=True)
    shutil.copy(NET, tmp_path / "proj" / "nets" / "net.py")
    return tmp_path / "proj"


@pytest.fixture()
def tune(tune_binary, tmp_path):
    env = {name: value for name, value in os.environ.items() if not name.startswith("ACSPEED_")}
    env.update(ACSPEED_PYTHON=sys.executable, ACSPEED_DB=str(tmp_path / "store" / "acspeed.db"))

    def run(*args, cwd, timeout=180):
        return subprocess.run([str(tune_binary), *args], capture_output=True, text=True, env=env, cwd=cwd,
                              timeout=timeout)
    run.db = tmp_path / "store" / "acspeed.db"
    return run


def _one_error(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1, (result.returncode, result.stderr)
    return lines[0]


@pytest.mark.parametrize("model", ["nets/net.py:TinyCNN", "nets.net:tiny_cnn"])
def test_dry_run_checks_a_model_from_the_start_folder(tune, project, model):
    result = tune("--model", model, "--image-size", "16", "--dry-run", cwd=project)
    assert result.returncode == 0, result.stderr
    assert f"--model {model} " in result.stdout and f"--start-dir {project} " in result.stdout, result.stdout
    assert f"model check: {model} (" in result.stdout and "(8, 3, 16, 16)" in result.stdout, result.stdout
    assert "ok (" in result.stdout and not result.stderr.strip(), result.stderr


def test_dry_run_of_an_unknown_torchvision_name_exits_2_naming_it(tune, tmp_path):
    message = _one_error(tune("--model", "resnet81", "--dry-run", cwd=tmp_path))
    assert "--model 'resnet81' is not a torchvision classification model" in message, message


def test_dry_run_of_data_that_cannot_be_imported_exits_2_naming_the_folder(tune, project):
    message = _one_error(tune("--model", "nets/net.py:TinyCNN", "--data", "nosuch.module:fn", "--dry-run", cwd=project))
    assert f"--data 'nosuch.module:fn': cannot import nosuch.module from {project} (the folder acspeed-tune was " \
           f"started in)" in message, message


def test_dry_run_of_a_model_that_cannot_be_built_names_what_was_found(tune, project):
    # Every error of the forms: tests/python/test_models.py.
    message = _one_error(tune("--model", "nets/net.py:Wide", "--dry-run", cwd=project))
    assert "--model 'nets/net.py:Wide': Wide is a class taking (channels, classes=10)" in message, message


@pytest.mark.slow
def test_a_session_tunes_a_model_from_a_file_relative_to_the_start_folder(tune, project):
    result = tune("--model", "nets/net.py:TinyCNN", "--image-size", "16", "--batch-size", "4", "--bucket-mb", "1,25",
                  "--algorithms", "allreduce", "--streams", "1", "--strategy", "grid", "--warmup", "1", "--steps",
                  "3", "--repeats", "3", "--nproc-per-node", "2", "--seed", "5", cwd=project, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    with sqlite3.connect(tune.db) as conn:
        assert conn.execute("SELECT model_name FROM decisions").fetchall() == [("nets/net.py:TinyCNN",)]
