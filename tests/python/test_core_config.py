"""The typed config across pybind11: acspeed._core.CommConfig is the C++ config itself (validated
once, read by attribute, compared, pickled for a broadcast), with the one precision list and the one
node-count rule beside it. No processes; well under a second."""
import pickle

import pytest

from acspeed import _runtime


@pytest.fixture()
def core():
    return _runtime.core()


def test_config_parses_once_and_reads_by_attribute(core):
    config, warnings = core.CommConfig.from_json('{"version": 1, "bucket_cap_mb": 5, "algorithm": "reduce_scatter", '
                                                 '"streams": 2, "compression": "fp16", "colour": "red", '
                                                 '"nccl_rules": [{"algorithm": "ring", "channels": 4}]}')
    assert warnings == ["unknown config key 'colour' ignored"]
    assert (config.bucket_cap_mb, config.first_bucket_mb, config.gradient_as_bucket_view) == (5.0, None, None)
    assert (config.algorithm, config.streams, config.compression) == ("reduce_scatter", 2, "fp16")
    assert [(r.algorithm, r.protocol, r.channels) for r in config.nccl_rules] == [("ring", "any", 4)]
    assert config.needs_comm_hook() and not config.is_default()
    assert config.describe() == "bucket 5 MiB, reduce_scatter, 2 streams, fp16, 1 NCCL rule(s)"
    again, _ = core.CommConfig.from_json(config.to_json())
    assert again == config and again != core.CommConfig()
    assert pickle.loads(pickle.dumps(config)) == config  # what broadcast_object_list does
    assert core.CommConfig().is_default() and not core.CommConfig().needs_comm_hook()


def test_bad_configs_are_value_errors_naming_the_value(core):
    with pytest.raises(ValueError, match="'streams' must be an integer"):
        core.CommConfig.from_json('{"version": 1, "streams": "two"}')
    with pytest.raises(ValueError, match="not valid JSON"):
        core.CommConfig.from_json('{"version": 1, "bucket_cap_mb": 1e999}')
    with pytest.raises(AttributeError):
        core.CommConfig().streams = 3  # read-only: a config is validated once, in C++


def test_lookup_returns_the_pinned_typed_config(core, monkeypatch, isolated_store):
    for name in ("ACSPEED_CONFIG", "ACSPEED_DISABLE", "NNODES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACSPEED_STREAMS", "3")
    result = core.resolve("box", "sig", "", 4, None)
    assert result["pinned"] == ["streams"] and result["applied"]
    assert result["comm_config"].streams == 3 and result["comm_config"].needs_comm_hook()


def test_one_precision_list_and_one_node_count_rule(core, monkeypatch):
    assert core.PRECISIONS == ("amp", "fp32", "fp16", "bf16")
    for name in ("NNODES", "GROUP_WORLD_SIZE", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert core.node_count(4) == 2
    monkeypatch.setenv("NNODES", "many")
    with pytest.raises(ValueError, match="NNODES='many'"):
        core.node_count(4)


def test_lookup_counts_nodes_itself_and_returns_the_typed_config(core, monkeypatch, isolated_store):
    monkeypatch.setenv("NNODES", "many")
    result = core.resolve("box", "sig", "", 4, None)
    assert result["source"] == "error" and "NNODES='many'" in result["message"]
    monkeypatch.delenv("NNODES")
    result = core.resolve("box", "sig", "", 4, None)
    assert result["source"] == "no_store"
    assert result["comm_config"] == core.CommConfig()


def test_the_hook_asks_the_runtimes_tables_what_each_algorithm_and_compression_is(core):
    """comm_methods.h through _core: capabilities, not names, tell the hook, the worker and the guard
    what to do (a new compression is a row there and its own module here)."""
    import torch  # noqa: PLC0415

    from acspeed.engine import algorithms, cast, compressor  # noqa: PLC0415
    assert list(core.COMPRESSIONS) == ["none", "fp16", "bf16", "powersgd"]
    assert set(core.ALGORITHMS) == set(algorithms.ALGORITHMS)
    assert [name for name, a in algorithms.ALGORITHMS.items() if a.by_node] == ["hierarchical"]
    for name, algorithm in algorithms.ALGORITHMS.items():  # the tuner's flow count (tuner/include/acspeed/tuner/flows.h) reads the row
        assert core.ALGORITHMS[name].crossing_phases == sum(role != "intra" for role in algorithm.roles), name
    for name, info in core.COMPRESSIONS.items():
        config, _ = core.CommConfig.from_json(f'{{"version": 2, "compression": "{name}"}}')
        assert config.compression_info.name == name and info.name == name
        assert config.compression_info.changes_numerics == (name != "none")
    fp16, _ = core.CommConfig.from_json('{"version": 2, "compression": "fp16"}')
    bf16, _ = core.CommConfig.from_json('{"version": 2, "compression": "bf16"}')
    psgd, _ = core.CommConfig.from_json('{"version": 2, "compression": "powersgd"}')
    assert (cast.wire_dtype(fp16), cast.wire_dtype(bf16), cast.wire_dtype(psgd)) == \
        (torch.float16, torch.bfloat16, None)
    # Every compression's wire form has a compressor (compressor.py's table), built from the config alone.
    params = [torch.nn.Parameter(torch.zeros(3, 2))]
    for name in core.COMPRESSIONS:
        config, _ = core.CommConfig.from_json(f'{{"version": 2, "compression": "{name}"}}')
        built = compressor.compressor_for(config, algorithms.ALGORITHMS["allreduce"], None, params)
        assert isinstance(built, compressor.COMPRESSORS[config.compression_info.form]), name
        assert built.wire_dtype == cast.wire_dtype(config) and built.begin_step() == (name in ("fp16", "bf16")), name
    assert psgd.compression_info.form == "low_rank" and psgd.compression_info.ranked
    assert psgd.compression_info.own_compute and psgd.compression_info.display_name == "PowerSGD"
    assert fp16.compression_info.form == "cast" and fp16.compression_info.cast_bytes == 2
    assert core.CommConfig().algorithm_info.name == "allreduce" and not core.CommConfig().algorithm_info.by_node
