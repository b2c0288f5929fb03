"""`import acspeed` inside a DDP job: what is applied, what the user chose wins, what steps aside,
and bad input (one warning on rank 0, DDP defaults, never a crash or hang; errors under
ACSPEED_STRICT=1). Two processes, one launch for all behaviours."""
import pytest

from ddp_harness import run_ranks
from ddp_scenarios import behaviours, nonfinite_fallback

pytestmark = pytest.mark.slow
MIB = 1024 * 1024
DDP_DEFAULT_CAP = 25 * MIB


@pytest.fixture(scope="module")
def observed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("configs")
    return run_ranks(behaviours, 2, str(folder))


def _warnings(log):
    return [line for level, line in log if level == "WARNING"]


def test_disable_leaves_ddp_untouched(observed):
    seen = observed[0]["disabled"]
    assert not seen["hook"] and seen["cap"] == DDP_DEFAULT_CAP and seen["equal"]
    assert [line for _, line in seen["log"]] == ["acspeed is disabled (ACSPEED_DISABLE=1): DDP runs untouched"]
    assert observed[1]["disabled"]["log"] == []  # rank 0 speaks


def test_forced_config_sets_ddp_knobs_and_hook(observed):
    seen = observed[0]["config_applied"]
    assert seen["hook"] and seen["cap"] == MIB // 2 and seen["view"] is True and seen["equal"]
    assert seen["first"] == MIB // 4
    assert len(seen["log"]) == 1 and "applied bucket 0.5 MiB, first bucket 0.25 MiB" in seen["log"][0][1]


def test_explicit_ddp_arguments_win(observed):
    seen = observed[0]["explicit_wins"]
    assert seen["cap"] == 2 * MIB and seen["view"] is False and seen["equal"]
    assert len(seen["log"]) == 1
    assert "kept your bucket_cap_mb=2" in seen["log"][0][1]
    assert "kept your gradient_as_bucket_view=False" in seen["log"][0][1]


def test_user_hook_wins_and_is_announced_once(observed):
    for rank, rank_seen in enumerate(observed):
        seen = rank_seen["user_hook"]
        assert seen["calls"] > 0 and seen["lanes"] == 0 and seen["equal"], rank
    replaced = [line for _, line in observed[0]["user_hook"]["log"] if "replaces acspeed's" in line]
    assert len(replaced) == 1 and "user_hook" in replaced[0]


def test_builtin_hook_registered_later_wins(observed):
    seen = observed[0]["builtin_hook"]
    assert seen["lanes"] == 0 and seen["equal"]
    replaced = [line for _, line in seen["log"] if "replaces acspeed's" in line]
    assert len(replaced) == 1 and "allreduce_hook" in replaced[0]


def test_observer_sees_every_bucket(observed):
    seen = observed[0]["observer"]
    # Step 1: DDP's single initial bucket; step 2: the rebuilt 0.001 MiB buckets (a weight and a bias each).
    assert seen["launched"] == seen["completed"] and len(seen["launched"]) >= 1 + 7
    assert seen["nbytes"] == 2 * seen["param_bytes"]


def test_torch_compile(observed):
    seen = observed[0]["compile"]
    assert seen["equal"] and seen["buckets_seen"] > 0
    reducer = observed[0]["python_reducer"]
    assert not reducer["hook"]
    assert any("bypasses DDP comm hooks" in line for _, line in reducer["log"])


@pytest.mark.parametrize("case", ["missing_file", "not_json", "unknown_algorithm", "streams_0",
                                  "bucket_negative", "bucket_zero", "pin_streams_abc", "pin_algorithm_ring",
                                  "disable_maybe", "nnodes_two"])
def test_bad_input_warns_once_and_keeps_ddp_defaults(observed, case):
    seen = observed[0][f"bad/{case}"]
    assert not seen["hook"] and seen["cap"] == DDP_DEFAULT_CAP and seen["equal"]
    assert len(seen["log"]) == 1 and len(_warnings(seen["log"])) == 1, seen["log"]
    assert observed[1][f"bad/{case}"]["log"] == []
    assert seen["log"][0][1].startswith("no change ("), seen["log"]
    # Under ACSPEED_STRICT=1 every rank raises (a SystemExit, so no traceback), none hangs, and rank 0's
    # one line says it raised, not "using DDP defaults" (issue 37: the old line said both).
    for rank_seen in observed:
        strict = rank_seen[f"bad/{case}"]["strict"]
        assert strict.startswith("acspeed: raised (ACSPEED_STRICT=1): "), rank_seen[f"bad/{case}"]
        assert "DDP defaults" not in strict and "no change" not in strict, strict
    assert observed[0][f"bad/{case}"]["strict_log"] == [("ERROR", observed[0][f"bad/{case}"]["strict"][9:])]
    assert observed[1][f"bad/{case}"]["strict_log"] == []


def test_bad_input_messages_name_the_value(observed):
    messages = {case: observed[0][f"bad/{case}"]["log"][0][1] for case in
                ("unknown_algorithm", "streams_0", "bucket_negative", "pin_streams_abc", "disable_maybe",
                 "nnodes_two")}
    assert "'ring'" in messages["unknown_algorithm"] and "allreduce" in messages["unknown_algorithm"]
    assert "streams 0" in messages["streams_0"]
    assert "-1" in messages["bucket_negative"]
    assert "abc" in messages["pin_streams_abc"]
    assert "maybe" in messages["disable_maybe"]
    assert "NNODES='two'" in messages["nnodes_two"]


def test_sparse_gradients_step_aside(observed):
    seen = observed[0]["sparse"]
    assert not seen["hook"]
    assert len(seen["log"]) == 1 and "sparse gradients" in seen["log"][0][1]


def test_ddp_skipping_unused_buckets_makes_the_hook_step_aside(observed):
    if "skip_unused" not in observed[0]:
        pytest.skip("this torch's DDP has no skip_all_reduce_unused_params")
    seen = observed[0]["skip_unused"]
    assert not seen["hook"]
    assert len(seen["log"]) == 1 and "skip_all_reduce_unused_params=True" in seen["log"][0][1]


def test_missing_runtime_warns_and_keeps_ddp(observed):
    seen = observed[0]["no_runtime"]
    assert not seen["hook"] and seen["equal"]
    assert len(seen["log"]) == 1 and len(_warnings(seen["log"])) == 1 and "not built" in seen["log"][0][1]


def test_unknown_key_warns_and_config_applies(observed):
    seen = observed[0]["unknown_key"]
    assert seen["cap"] == MIB // 2, seen
    assert len(seen["log"]) == 1 and "colour" in seen["log"][0][1]


def test_rewrap_releases_previous_lanes(observed):
    seen = observed[0]["rewrap"]
    assert seen["released"] == [True, True, True, False]  # each wrap released the one before
    assert seen["last_released"] and not seen["default_has_hook"]
    # gloo: 3 lanes x (1 group + 2 intra-node groups, one per intra-node phase); only the 4th
    # wrap's groups are alive, and acspeed runs no thread of its own.
    assert seen["groups_per_wrap"] == [9, 9, 9, 9]
    assert seen["groups_alive"] == [0, 0, 0, 9] and seen["acspeed_threads"] == [], seen


def test_compression_guard_falls_back_on_overflow_and_inf():
    results = run_ranks(nonfinite_fallback, 2)
    seen = results[0]
    for name in ("overflow", "inf", "overflow_left"):
        for rank_seen in results:
            assert rank_seen[name]["fallbacks"] == 1, (name, rank_seen[name])
            assert rank_seen[name]["injected_bucket_equal"] and rank_seen[name]["same_nonfinite"], (name, rank_seen[name])
            assert rank_seen[name]["rest_max_rel"] < 1e-3, (name, rank_seen[name])
    # Rank 1's slowed collectives kept rank 0's last bucket in flight when its last hook call got to it:
    # that bucket's own finish found the overflow and issued the re-send, and it still matches DDP.
    assert seen["overflow_left"]["left_to_finish"] == 1, seen["overflow_left"]
    warnings = _warnings(seen["overflow"]["log"])
    assert len(warnings) == 1 and "NaN/Inf" in warnings[0] and "reduced uncompressed" in warnings[0]
    # bf16 holds every sum fp32 does: no check, the Inf reaches the gradients as under plain DDP, silently.
    bf16 = seen["bf16_inf"]
    assert bf16["fallbacks"] == 0 and bf16["same_nonfinite"] and _warnings(bf16["log"]) == [], bf16
    assert bf16["rest_max_rel"] < 1e-2, bf16
