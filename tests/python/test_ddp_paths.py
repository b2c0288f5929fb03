"""DDP's own code paths with acspeed applied, for every kind of config, against a reference run
(plain DDP, or torch's stock hook for the same math): copies (pickle, deepcopy, torch.save), which
run no collective and hold nothing of acspeed's; backward(create_graph=True) and gradient
penalties; a GradScaler skipping a step, side by side with torch's fp16 and PowerSGD hooks; backends
whose Work has no future, backend names, subgroups, device meshes; uneven inputs under Join;
DDP(torch.compile(model)) and DDP's per-parameter (python reducer) hook path. Two ranks on gloo,
two launches."""
import pytest

from ddp_harness import run_ranks
from ddp_paths_scenarios import GRAPH_KINDS, KINDS, backends_and_compile, copies_and_autograd

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def autograd_paths():
    return run_ranks(copies_and_autograd, 2, timeout=600)


@pytest.fixture(scope="module")
def group_paths(tmp_path_factory):
    return run_ranks(backends_and_compile, 2, str(tmp_path_factory.mktemp("configs")), timeout=600)


@pytest.mark.parametrize("kind", list(KINDS))
def test_copies_hold_nothing_of_acspeed_and_run_no_collective(autograd_paths, kind):
    seen = autograd_paths[0]["copies"][kind]
    for how in ("pickle", "deepcopy", "torch_save"):
        copy = seen[how]
        assert copy["foreign"] == [] and not copy["hook"] and copy["same_params"], (how, copy)
        # DDP's own list of registered hooks: empty, or the user's hook that replaced acspeed's
        assert copy["comm_hooks"] == (["allreduce_hook"] if kind == "user_hook" else []), (how, copy)
    for rank_seen in autograd_paths:  # rank 0 copied alone, rank 1 did not: the ranks stayed in step
        result = rank_seen["copies"][kind]
        assert result["original_unchanged"] and result["hook_kept"], result
        # DDP's rule for a copy: a new reducer on the default group, no comm hook; it trains as plain DDP
        assert result["copy_trains_as_plain_ddp"], result
        assert result["copy_state_dict"] == {"version": 1, "compression": "none", "tensors": {}}
    assert seen["powersgd_tensors"] == (8 if kind == "powersgd" else 0), seen


@pytest.mark.parametrize("kind", list(GRAPH_KINDS))
def test_create_graph_gives_torchs_gradients(autograd_paths, kind):
    for rank_seen in autograd_paths:
        seen = rank_seen["create_graph"][kind]
        assert seen["same_as_without_create_graph"] and seen["trained_same_as_without"], seen
        # the penalty's second-order gradient flows through the local gradients / W, as in plain DDP
        assert seen["second_rel_err"] <= 1e-6, seen
        if kind == "powersgd":  # torch's powerSGD_hook raises under create_graph (below): close to plain DDP
            assert seen["trained_rel_to_plain"] < 0.2 and seen["penalty_rel_to_plain"] < 0.2, seen
            assert seen["penalty_finite"], seen
            continue
        assert seen["same_as_torch"] and seen["trained_equal_torch"] and seen["penalty_equal_torch"], seen
        if kind == "fp16":  # torch's fp16 hook puts an fp16 cast in the gradients' graph; acspeed's is DDP's
            assert seen["second_rel_to_torch"] < 1e-2, seen
        else:
            assert seen["second_rel_to_torch"] == 0.0, seen
    assert "don't support automatic differentiation" in autograd_paths[0]["create_graph"]["torch_powersgd"]


def test_grad_scaler_skips_the_same_steps_as_torchs_hooks(autograd_paths):
    for name in ("fp16", "powersgd"):
        runs = [rank_seen["skipped_steps"][name] for rank_seen in autograd_paths]
        assert runs[0]["params"] == runs[1]["params"], name  # ranks identical
        seen = runs[0]
        # step 3 (rank 1's Inf) is skipped and the scale backs off, as with plain DDP
        assert seen["finite"] == [True, True, True, False, True, True, True], seen
        assert seen["scales"] == seen["plain_scales"] and seen["params_finite"], seen
        assert seen["rel_to_plain"] < (1e-3 if name == "fp16" else 1e-2), seen
    fp16 = autograd_paths[0]["skipped_steps"]["fp16"]
    assert fp16["scales"] == fp16["torch_scales"] and fp16["params_equal_torch"], fp16
    psgd = autograd_paths[0]["skipped_steps"]["powersgd"]
    assert psgd["residuals_finite"], psgd
    # torch's powerSGD_hook skips the same step but keeps the Inf in its residual: every later step is
    # non-finite and skipped, the scale keeps halving; acspeed's recovers at the next step
    assert psgd["torch_finite"][:4] == psgd["finite"][:4] and psgd["torch_scales"][:4] == psgd["scales"][:4], psgd
    assert not psgd["torch_residuals_finite"] and not any(psgd["torch_finite"][4:]), psgd


@pytest.mark.parametrize("kind", ["hooked", "fp16", "hierarchical"])
def test_backend_without_futures_gets_bucket_settings_and_one_warning(group_paths, kind):
    for rank, rank_seen in enumerate(group_paths):
        seen = rank_seen[f"no_future/{kind}"]
        assert not seen["hook"] and seen["cap"] == 1048 and seen["equal"], seen
        warnings = [line for level, line in seen["log"] if level == "WARNING"]
        assert len(warnings) == (1 if rank == 0 else 0) and len(seen["log"]) == len(warnings), seen
        if rank == 0:
            assert "getFuture not implemented" in warnings[0] and "built-in allreduce" in warnings[0], warnings


def test_backend_names_subgroups_and_device_mesh(group_paths):
    # The mixed group needs a CUDA device to exist at all. Without one, a rank fails on its NCCL half;
    # the other may fail first on its gloo half, which the failing peer left (a closed connection):
    # then every rank skipped, and one of them for NCCL.
    mixed = [rank_seen["backend/cpu:gloo,cuda:nccl"] for rank_seen in group_paths]
    assert (all("skipped" in seen for seen in mixed) and any(seen["skipped"].startswith("nccl") for seen in mixed)) \
        or all(seen.get("hook") and seen.get("equal") for seen in mixed), mixed
    for rank_seen in group_paths:
        gloo = rank_seen["backend/cpu:gloo"]
        assert gloo["backend"] == "cpu:gloo" and gloo["hook"] and gloo["equal"], gloo
        for name in ("subgroup/all", "device_mesh"):
            assert rank_seen[name]["hook"] and rank_seen[name]["equal"], (name, rank_seen[name])
        own = rank_seen["subgroup/own"]  # a group of one rank: bucket settings only, as plain DDP on it
        assert not own["hook"] and own["equal"], own
    assert any("process group of part of the job" in line for _, line in group_paths[0]["subgroup/own"]["log"])


def test_ddp_around_a_compiled_module_matches_plain_ddp(group_paths):
    for rank_seen in group_paths:
        assert rank_seen["compiled_module/bucket_only"] == {"hook": False, "equal": True}
        assert rank_seen["compiled_module/hooked"] == {"hook": True, "equal": True}


def test_uneven_inputs_under_join_match_torch(group_paths):
    for rank_seen in group_paths:
        for name in ("hooked", "fp16"):  # against plain DDP / torch's fp16_compress_hook under Join
            assert rank_seen[f"join/{name}"] == {"hook": True, "equal": True}, (name, rank_seen[f"join/{name}"])


def test_per_parameter_hook_path_never_runs_acspeeds_bucket_hook(group_paths):
    for rank_seen in group_paths:
        seen = rank_seen["python_reducer_later"]
        assert seen == {"equal": True, "bucket_hook_calls": 0, "comm_hooks": 0, "lanes": 2}, seen
