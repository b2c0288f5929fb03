"""--model's forms (acspeed._worker.models, the one check in acspeed._worker.check that the workers and
`acspeed-tune --dry-run` run) and the seed example's own copy of them: a torch.nn.Module class, a
function returning a module, a function returning (model, make_batch), from pkg.module:name or
path/to/file.py:name (relative to the start folder); each error names what was found."""
import argparse
import importlib.util
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

from acspeed._worker import batches, check, models

NETS = pathlib.Path(__file__).resolve().parent.parent / "support" / "user_nets.py"


@pytest.fixture()
def project(tmp_path, monkeypatch):
    """A user's folder holding nets/models.py; the tests run from another folder."""
    (tmp_path / "proj" / "nets").mkdir(parents=True)
    shutil.copy(NETS, tmp_path / "proj" / "nets" / "models.py")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    monkeypatch.setattr(sys, "path", list(sys.path))  # the loader adds the start folder
    for name in [name for name in sys.modules if name == "models" or name.startswith("nets")]:
        monkeypatch.delitem(sys.modules, name)
    return tmp_path / "proj"


def _args(model, start_dir, data=None, batch_size=4, image_size=16):
    return argparse.Namespace(model=model, batch_size=batch_size, image_size=image_size, data=data,
                              trajectory_steps=0, start_dir=str(start_dir))


@pytest.mark.parametrize("spec, classes", [
    ("nets/models.py:TinyCNN", 7),          # a class, from a file relative to the start folder
    ("nets/models.py:tiny_cnn", 5),         # a function returning a module
    ("nets.models:TinyCNN", 7),             # the same from a module, imported from the start folder
])
def test_a_module_without_make_batch_trains_on_random_images(project, spec, classes):
    model, first, made = check.model_and_batches(_args(spec, project), 0, 2)
    inputs, targets = first
    assert inputs.shape == (4, 3, 16, 16) and inputs.dtype == torch.float32
    assert targets.dtype == torch.int64 and int(targets.max()) < classes
    assert model(inputs).shape == (4, classes) and len(made) == 1
    check.model_fits(_args(spec, project), model, first)


def test_a_function_returning_model_and_make_batch_keeps_its_batches(project):
    model, (inputs, targets), _ = check.model_and_batches(_args("nets/models.py:with_batches", project), 0, 2)
    assert isinstance(model, torch.nn.Linear) and inputs.shape == (4, 6) and targets.shape == (4,)


@pytest.mark.parametrize("spec, found", [
    ("nets/models.py:Wide", "Wide is a class taking (channels, classes=10); acspeed calls it without arguments"),
    ("nets/models.py:sized", "sized is a function taking (depth)"),
    ("nets/models.py:odd_pair", "odd_pair() returned a tuple of 2 (Linear, int), not a torch.nn.Module nor "
                                "(model, make_batch)"),
    ("nets/models.py:instance", "instance is a Module (Linear) object; name its class or a function"),
    ("nets/models.py:NUMBER", "NUMBER is a int, not a torch.nn.Module class or a function"),
    ("nets/models.py:broken", "broken() raised RuntimeError: weights file missing"),
    ("nets/models.py:missing", "has no class or function missing (it defines: TinyCNN, Wide, bad_batch, broken, "
                               "features_only"),
    ("nets/nothere.py:TinyCNN", "no file {proj}/nets/nothere.py (nets/nothere.py from {proj}, the folder "
                                "acspeed-tune was started in)"),
    ("nets.absent:TinyCNN", "cannot import nets.absent from {proj} (the folder acspeed-tune was started in) or "
                            "PYTHONPATH"),
    ("resnet81", "'resnet81' is not a torchvision classification model"),
])
def test_a_model_that_cannot_be_built_names_what_was_found(project, spec, found):
    with pytest.raises(models.ModelSpecError) as caught:
        models.build_model(spec, 16, str(project))
    message = str(caught.value)
    assert message.startswith(f"--model '{spec}'") and found.format(proj=project) in message, message


def test_a_model_that_rejects_the_default_batch_names_the_shape_tried(project):
    args = _args("nets/models.py:features_only", project, batch_size=3)
    with pytest.raises(models.ModelSpecError) as caught:
        check.model_and_batches(args, 0, 2)
    message = str(caught.value)
    assert "rejects the default batch of shape (3, 3, 16, 16)" in message, message
    assert message.endswith("give make_batch or --data"), message


def test_a_make_batch_that_returns_no_pair_names_what_it_returned(project):
    with pytest.raises(models.ModelSpecError) as caught:
        check.model_and_batches(_args("nets/models.py:bad_batch", project), 0, 2)
    assert "make_batch(4) is (a tensor (4, 6) torch.float32), expected (inputs, targets)" in str(caught.value)


def test_data_from_a_file_relative_to_the_start_folder(project):
    (project / "loader.py").write_text(textwrap.dedent('''
        import torch

        def batches(rank, world_size, batch_size):
            while True:
                yield torch.randn(batch_size, 6), torch.randint(0, 3, (batch_size,))
    '''))
    got = batches.from_data("loader.py:batches", 0, 2, 4, 3, str(project))
    assert len(got) == 3 and got[0][0].shape == (4, 6)


def test_the_check_program_exits_2_with_the_message_and_resolves_from_the_start_folder(project, repo_root):
    command = [sys.executable, "-m", "acspeed._worker.check", "--batch-size", "2", "--image-size", "16",
               "--start-dir", str(project)]
    ok = subprocess.run([*command, "--model", "nets/models.py:TinyCNN"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("model check: nets/models.py:TinyCNN (") and "(2, 3, 16, 16)" in ok.stdout
    bad = subprocess.run([*command, "--model", "nets/models.py:Wide"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.strip().startswith("--model 'nets/models.py:Wide': Wide is a class "
                                                                 "taking (channels, classes=10)"), bad.stderr


def _example(repo_root):
    spec = importlib.util.spec_from_file_location("ddp_benchmark", repo_root / "examples" / "Pytorch_ddp_benchmark.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("spec", ["nets/models.py:TinyCNN", "nets/models.py:tiny_cnn", "nets.models:with_batches"])
def test_the_seed_example_builds_the_same_model_from_the_same_forms(project, repo_root, monkeypatch, spec):
    """Its own copy of the forms (it runs without acspeed): the same parameters, hence the same
    model signature `import acspeed` looks up, and a batch the model trains on."""
    monkeypatch.chdir(project)  # the example's relative paths are the current folder's
    example = _example(repo_root)
    model, make_batch = example.build_model(spec, 16, torch.device("cpu"))
    ours, _ = models.build_model(spec, 16, str(project))
    assert [(n, p.shape) for n, p in model.named_parameters()] == [(n, p.shape) for n, p in ours.named_parameters()]
    inputs, targets = make_batch(2)
    torch.nn.functional.cross_entropy(model(inputs), targets)


def test_the_seed_example_names_what_a_function_returned(project, repo_root, monkeypatch):
    monkeypatch.chdir(project)
    example = _example(repo_root)
    with pytest.raises(SystemExit, match=r"odd_pair\(\) returned tuple, not a torch.nn.Module nor \(model, "
                                         r"make_batch\)"):
        example.build_model("nets/models.py:odd_pair", 16, torch.device("cpu"))
    model, make_batch = example.build_model("nets/models.py:features_only", 16, torch.device("cpu"))
    with pytest.raises(SystemExit, match=r"rejects the default batch of shape \(2, 3, 16, 16\)"):
        make_batch(2)
