"""acspeed._supported: the versions an installed acspeed supports come from its package metadata,
and an unsupported Python or torch is named, with the supported range, in one line."""
import importlib.metadata
import inspect
import platform

import pytest

from acspeed import _supported


@pytest.mark.parametrize("version, specifier, expected", [
    ("2.15.0", ">=2.1,<3", True),
    ("2.15.0+cu124", ">=2.1,<3", True),
    ("2.1", ">=2.1", True),
    ("2.0.1", ">=2.1,<3", False),
    ("3.0.0a0", ">=2.1,<3", False),
    ("3.13.0", ">=3.10,<3.14", True),
    ("3.14.0", ">=3.10,<3.14", False),
    ("3.9.18", ">=3.10, <3.14", False),
    ("2.4.0", "!=2.4", False),
    ("2.4.1", "==2.4.1", True),
    ("1.0", "", True),
])
def test_satisfies(version, specifier, expected):
    assert _supported.satisfies(version, specifier) is expected


def test_a_clause_it_cannot_read_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"clause '~=2.1' of '~=2.1' is not one of"):
        _supported.satisfies("2.1", "~=2.1")


def _fake_distribution(site, name, requires_python, requires):
    info = site / f"{name}-9.9.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", "Version: 9.9", f"Requires-Python: {requires_python}"]
    lines += [f"Requires-Dist: {requirement}" for requirement in requires]
    (info / "METADATA").write_text("\n".join(lines) + "\n")


def test_unsupported_python_and_torch_are_named_with_the_ranges(tmp_path, monkeypatch):
    torch = importlib.metadata.version("torch")
    _fake_distribution(tmp_path, "acspeedprobe", ">=3.99", ["torch<2", "torchvision; extra == 'examples'"])
    monkeypatch.syspath_prepend(str(tmp_path))
    found = _supported.problems("acspeedprobe")
    assert found == [f"acspeed 9.9 supports Python >=3.99; this is Python {platform.python_version()}",
                     f"acspeed 9.9 supports torch <2; this is torch {torch}"], found


def test_supported_environment_and_a_checkout_have_no_problems(tmp_path, monkeypatch):
    _fake_distribution(tmp_path, "acspeedfine", ">=3.8", ["torch>=2.1", "numpy"])
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _supported.problems("acspeedfine") == []
    assert _supported.problems("acspeed-not-installed-anywhere") == []


def test_device_id_is_passed_on_cuda_only_where_init_process_group_has_it():
    """init_process_group's device_id (issue 38 item 4): given for a CUDA device when the signature
    has it, never for a CPU job, never to a torch whose init_process_group lacks it (torch >= 2.1 is
    supported); the real torch.distributed is read when no function is given."""
    import torch
    import torch.distributed as dist

    def with_device_id(backend=None, init_method=None, device_id=None):
        pass

    def without_device_id(backend=None, init_method=None, timeout=None):
        pass

    cuda, cpu = torch.device("cuda", 1), torch.device("cpu")
    assert _supported.device_id_kwargs(cuda, with_device_id) == {"device_id": cuda}
    assert _supported.device_id_kwargs(cuda, without_device_id) == {}
    assert _supported.device_id_kwargs(cpu, with_device_id) == {}
    assert _supported.device_id_kwargs(None, with_device_id) == {}
    # This torch (2.15 here) has the parameter: a CUDA device gets it without touching CUDA.
    has_it = "device_id" in inspect.signature(dist.init_process_group).parameters
    assert _supported.device_id_kwargs(cuda) == ({"device_id": cuda} if has_it else {})
