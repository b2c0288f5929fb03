"""`import acspeed` itself: it is cheap (no runtime, hooks or torchvision loaded), patches DDP in place
keeping its signature, points NCCL at the tuner plugin, and hands NCCL rules to the plugin (a fake
plugin library stands in for libnccl-tuner-acspeed.so, which needs a GPU build)."""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

FAKE_PLUGIN = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((visibility("default"))) int acspeed_nccl_tuner_set_rules(const char* config_json) {
  FILE* out = fopen(getenv("FAKE_PLUGIN_RECORD"), "a");
  if (!out) return 3;
  fprintf(out, "%s\n", config_json);
  fclose(out);
  return 0;
}
"""


def _python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, **env))


@pytest.mark.parametrize("cuda", [False, True])
def test_import_is_lazy_and_patches_ddp_in_place(cuda):
    """Also where torch can use CUDA (simulated as tests/tuner/torch_on_cuda.py does): NCCL's variables
    wait for the first process group (acspeed.first_group), so the runtime stays unloaded."""
    code = ("from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "import sys, inspect\n"
            "before = inspect.signature(DDP.__init__)\n"
            "import acspeed\n"
            "loaded = sorted(m for m in sys.modules if m.startswith(('acspeed', 'torchvision')))\n"
            "print(loaded)\n"
            "print(hasattr(DDP.__init__, '_acspeed_original'), inspect.signature(DDP.__init__) == before)\n")
    if cuda:
        on_cuda = pathlib.Path(__file__).resolve().parents[1] / "tuner" / "torch_on_cuda.py"
        done = subprocess.run([sys.executable, str(on_cuda), "-c", code], capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, FAKE_TORCH_NCCL="2.28.9", FAKE_TORCH_CUDA="13.0"))
    else:
        done = _python(code)
    assert done.returncode == 0, done.stderr
    loaded, patched = done.stdout.splitlines()
    names = set(eval(loaded))  # noqa: S307 - the list printed above
    # no runtime, hooks, torchvision; the supported-versions check reads only package metadata; the
    # instance knobs (NCCL's sockets) and shared GPUs wait for the first process group
    assert names == {"acspeed", "acspeed._exit", "acspeed._log", "acspeed._patch", "acspeed._supported", "acspeed.nccl",
                     "acspeed.first_group"}
    assert patched == "True True"


def test_configure_rejects_unknown_precision():
    import acspeed
    with pytest.raises(ValueError, match="'fp8' is not one of amp, fp32, fp16, bf16"):
        acspeed.configure(precision="fp8")
    acspeed.configure(precision="amp")
    acspeed.configure(precision=None)


@pytest.fixture()
def fake_plugin(tmp_path):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the fake plugin")
    source = tmp_path / "fake.c"
    source.write_text(FAKE_PLUGIN)
    library = tmp_path / "libnccl-tuner-acspeed.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return library


def test_import_points_nccl_at_the_plugin_unless_user_chose(fake_plugin):
    from acspeed import nccl
    env = dict(os.environ)
    env.pop("NCCL_TUNER_PLUGIN", None)
    try:
        os.environ.pop("NCCL_TUNER_PLUGIN", None)
        nccl.export_plugin(fake_plugin)
        assert os.environ["NCCL_TUNER_PLUGIN"] == str(fake_plugin)
        os.environ["NCCL_TUNER_PLUGIN"] = "/opt/other/libnccl-tuner-x.so"
        nccl.export_plugin(fake_plugin)
        assert os.environ["NCCL_TUNER_PLUGIN"] == "/opt/other/libnccl-tuner-x.so"
        os.environ.pop("NCCL_TUNER_PLUGIN")
        nccl.export_plugin(fake_plugin.parent / "absent.so")
        assert "NCCL_TUNER_PLUGIN" not in os.environ
    finally:
        os.environ.clear()
        os.environ.update(env)


def test_rules_reach_file_and_live_plugin(fake_plugin, tmp_path, monkeypatch):
    from acspeed import nccl
    record = tmp_path / "calls.txt"
    monkeypatch.setenv("FAKE_PLUGIN_RECORD", str(record))
    monkeypatch.delenv("ACSPEED_NCCL_RULES", raising=False)
    config = json.dumps({"version": 1, "nccl_rules": [{"collective": "allreduce", "algorithm": "ring",
                                                       "protocol": "simple", "channels": 4}]})
    # Plugin not selected for NCCL: only the file for later communicators.
    monkeypatch.setenv("NCCL_TUNER_PLUGIN", "/opt/other/libnccl-tuner-x.so")
    nccl.publish_rules(config, fake_plugin)
    assert open(os.environ["ACSPEED_NCCL_RULES"]).read() == config and not record.exists()
    # Selected: the setter is called too, for communicators that already exist.
    monkeypatch.setenv("NCCL_TUNER_PLUGIN", str(fake_plugin))
    nccl.publish_rules(config, fake_plugin)
    assert record.read_text().splitlines() == [config]
    # A rules file the user named is left alone.
    monkeypatch.setenv("ACSPEED_NCCL_RULES", str(tmp_path / "mine.json"))
    nccl.publish_rules(config, fake_plugin)
    assert os.environ["ACSPEED_NCCL_RULES"] == str(tmp_path / "mine.json")
    assert len(record.read_text().splitlines()) == 1


def test_the_rules_file_is_removed_when_the_process_exits(tmp_path):
    """Every process that applies a config writes its own rules file (named by its pid): it must not
    stay behind in the temporary folder after the job."""
    code = ("import os, sys\n"
            "from acspeed import nccl\n"
            "nccl.publish_rules('{\"version\": 1}', nccl.plugin_path())\n"
            "nccl.publish_rules('{\"version\": 1}', nccl.plugin_path())\n"  # written twice, removed once
            "print(os.environ['ACSPEED_NCCL_RULES'])\n")
    env = {key: value for key, value in os.environ.items() if key != "ACSPEED_NCCL_RULES"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            env=dict(env, TMPDIR=str(tmp_path)), check=True)
    written = result.stdout.strip()
    assert written.startswith(str(tmp_path)) and not os.path.exists(written), (written, os.listdir(tmp_path))
    assert result.stderr == ""


def test_real_plugin_accepts_config_rules(tmp_path, monkeypatch):
    """With libnccl-tuner-acspeed.so built (CMake puts it next to the package), its setter takes a
    valid config's rules (status 0, no warning) and refuses a bad one (acspeed warns once)."""
    import logging

    from acspeed import nccl
    plugin = nccl.plugin_path()
    if not plugin.is_file():
        pytest.skip(f"{plugin} is not built (CMake target acspeed_nccl_tuner, needs the CUDA toolkit)")
    seen = []

    class Capture(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())
    handler = Capture()
    logging.getLogger("acspeed").addHandler(handler)
    try:
        monkeypatch.setenv("NCCL_TUNER_PLUGIN", str(plugin))
        monkeypatch.delenv("ACSPEED_NCCL_RULES", raising=False)
        good = json.dumps({"version": 1, "nccl_rules": [{"collective": "allreduce", "max_bytes": 65536,
                                                         "algorithm": "tree", "protocol": "ll", "channels": 2}]})
        nccl.publish_rules(good, plugin)
        assert seen == []
        nccl.publish_rules('{"version": 1, "nccl_rules": [{"protocol": "fast"}]}', plugin)
        assert len(seen) == 1 and "refused the rules" in seen[0]
    finally:
        logging.getLogger("acspeed").removeHandler(handler)
