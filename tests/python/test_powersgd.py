"""Compression powersgd in acspeed's comm hook, on gloo at 2 and 4 ranks: the averaged gradients,
error feedback and warm-start factors match a NumPy reference of torch's PowerSGD math step after
step (one bucket, and one bucket per tensor); every bucket size x streams x algorithm runs through the engine's ordered issuing
(strict: a bucket out of order is an error), the same collectives on every rank; the state kept for
a checkpoint resumes bit for bit; a model of 1-D gradients takes the plain path and says so once; a
non-finite gradient never reaches the factors and residuals (guard: re-sent uncompressed; GradScaler:
it backs off)."""
import itertools

import numpy as np
import pytest
import torch

from acspeed.engine.powersgd import orthonormalize

from ddp_harness import run_ranks
from powersgd_scenarios import all_one_dimensional, combos, gram_schmidt, non_finite, reference, resumption

pytestmark = pytest.mark.slow

REFERENCE_TOLERANCE = 1e-4  # fp32 engine vs float64 reference, max |diff| / max |reference|
ALGORITHMS = ("allreduce", "reduce_scatter", "hierarchical")
COMBOS = list(itertools.product(ALGORITHMS, (1, 2, 3), (0.001, 25.0)))


@pytest.mark.parametrize("world_size, algorithm, bucket_mb, psgd_rank", [
    (2, "allreduce", 25.0, 2), (4, "allreduce", 0.001, 2), (2, "reduce_scatter", 25.0, 2),
    (4, "hierarchical", 25.0, 2), (4, "hierarchical", 0.001, 2),
    (2, "allreduce", 25.0, 4)])  # rank 4: orthonormalised by the QR (up to rank 2 by the loop)
def test_averaged_gradients_errors_and_factors_match_the_numpy_reference(world_size, algorithm, bucket_mb, psgd_rank):
    # hierarchical: two nodes of two ranks; ranks 0 and 2 (the leaders) factor their nodes' sums
    results = run_ranks(reference, world_size, algorithm, psgd_rank, bucket_mb, env={"LOCAL_WORLD_SIZE": "2"})
    for rank, result in enumerate(results):
        assert result["worst"]["grad"] <= REFERENCE_TOLERANCE, result
        assert result["worst"]["error"] <= REFERENCE_TOLERANCE, result
        assert result["worst"]["q"] <= REFERENCE_TOLERANCE, result
        assert result["steps"] == 5 and result["compressed_buckets"] >= 4 and result["compute_s"] == 4, result
        if algorithm == "hierarchical" and rank % 2:  # not a leader: no factors, no residual kept
            assert result["errors"] == [], result
            continue
        # the residual is carried from step to step (rank 2 of 40x24 and 33x40 matrices is lossy)
        assert len(result["errors"]) == 4 and min(result["errors"]) > 0, result


@pytest.mark.parametrize("rank", [1, 2, 3, 4, 16])
def test_orthonormalize_gives_the_gram_schmidt_factors_a_zero_column_staying_zero(rank):
    generator = torch.Generator().manual_seed(rank)
    pt = torch.randn(rank, 300, generator=generator) * torch.logspace(0, -3, rank).unsqueeze(1)
    pt[-1] = 0  # P's last column is zero
    want = gram_schmidt(pt.t().double().numpy())
    orthonormalize(pt)
    assert np.abs(pt.t().double().numpy() - want).max() <= 1e-5
    assert not pt[-1].any()
    gram = pt[:-1] @ pt[:-1].t()
    assert torch.allclose(gram, torch.eye(rank - 1), atol=1e-5), gram


def _check_combos(results, hierarchical_compressed: bool, identical_within_bucket: bool):
    for rank_result in results:
        for name, value in rank_result.items():
            if name == "_log":
                continue
            assert value["finite"], (name, value)
            # low-rank gradients are not DDP's, but training stays close over six small steps
            assert value["rel_to_update"] < 0.5, (name, value)
            compressed = not name.startswith("hierarchical") or hierarchical_compressed
            assert (value["compressed_buckets"] > 0) == compressed, (name, value)
            if not compressed:  # one node: no inter-node step to compress, exactly DDP
                assert value["rel_to_params"] <= 1e-6, (name, value)
            elif identical_within_bucket and not name.startswith("hierarchical"):
                assert value["same_as_first"], (name, value)
            elif not name.startswith("hierarchical"):
                assert value["rel_to_first"] <= 1e-4, (name, value)


def test_two_ranks_every_bucket_size_streams_and_algorithm():
    results = run_ranks(combos, 2, COMBOS, env={"LOCAL_WORLD_SIZE": "2"})
    # a sum of two is the same in any order, and the state is per tensor: buckets, algorithms and lanes
    # change nothing
    _check_combos(results, hierarchical_compressed=False, identical_within_bucket=True)


def test_two_nodes_of_one_rank_hierarchical_compresses_bit_for_bit_as_flat():
    # LOCAL_WORLD_SIZE=1: the intra-node steps have nothing to do, the leaders are every rank; the
    # convergence guard takes the two for one numerics there (tuner/src/guard.h: numerics_key)
    names = [("allreduce", 1, 0.001), ("hierarchical", 1, 0.001), ("hierarchical", 2, 25.0)]
    for rank_result in run_ranks(combos, 2, names, env={"LOCAL_WORLD_SIZE": "1"}):
        for name, value in rank_result.items():
            if name != "_log":
                assert value["compressed_buckets"] > 0 and value["same_as_first"], (name, value)


def test_four_ranks_two_nodes_compress_the_inter_node_step():
    results = run_ranks(combos, 4, COMBOS, env={"LOCAL_WORLD_SIZE": "2"})
    _check_combos(results, hierarchical_compressed=True, identical_within_bucket=False)
    # the two nodes' leaders factor the node sums: every rank ends with the same parameters
    for name in results[0]:
        if name != "_log":
            assert len({r[name]["max_abs"] for r in results}) == 1, name


def test_state_dict_resumes_exactly_and_without_it_training_differs():
    for result in run_ranks(resumption, 2):
        assert result["saved_step"] == 3 and result["saved_tensors"] == 8 and result["error_norm"] > 0, result
        assert result["with_state"] and not result["without_state"], result
        assert "powersgd_rank 1, this model's config has 3" in result["wrong_rank"], result


def test_a_model_of_only_1d_gradients_takes_the_plain_path_and_says_so_once():
    results = run_ranks(all_one_dimensional, 2)
    assert all(r["same_as_ddp"] and r["compressed_buckets"] == 0 for r in results), results
    assert len(results[0]["log"]) == 1 and "nothing to factor" in results[0]["log"][0], results[0]
    assert results[1]["log"] == [], results[1]


def test_an_inf_gradient_leaves_factors_and_residuals_as_they_were_and_training_recovers():
    results = run_ranks(non_finite, 2, env={"LOCAL_WORLD_SIZE": "1"})
    for rank_result in results:
        for name, case in rank_result.items():
            if name == "_log":
                continue
            # Every rank saw the bad step alike (the reduced factors are the same everywhere), and after it
            # the state and the parameters are finite and training went on finite.
            assert case["finite_grads"] == [True, True, True, False, True, True], (name, case)
            assert case["state_finite"] and case["params_finite"] and case["losses_finite"], (name, case)
            assert case["compressed_buckets"] > 0, (name, case)
            if name.endswith("b0.001"):  # one bucket per tensor: only the injected tensor's state stood still
                assert case["unchanged"] == ["0.weight"] and case["tensors"] == 8, (name, case)
            else:  # one bucket: no tensor's factors or residual moved, as if the batch had never been seen
                assert len(case["unchanged"]) == case["tensors"] == 8, (name, case)
            if name.startswith("fallback/") and "hierarchical" not in name:
                # the bad bucket was reduced again uncompressed (DDP's numbers, the Inf included), once
                assert case["fallbacks"] == 1 and case.get("reference_fallbacks", 0) == 0, (name, case)
            else:  # hierarchical (raw gradients consumed by the intra-node reduce) and under a scaler: no re-send
                assert case["fallbacks"] == 0, (name, case)
            if name.endswith("b25") and not name.startswith("scaler/"):
                assert case["same_as_without_the_batch"], (name, case)
        scaled = rank_result["scaler/allreduce/b25"]
        assert scaled["scales"] == [256.0, 256.0, 256.0, 128.0, 128.0, 128.0], scaled  # it skipped and backed off
    warnings = results[0]["_log"]
    # one warning per hook at most (a later hook may reuse a freed one's id, so not always three)
    assert 1 <= len(warnings) <= 3 and all("powersgd compression gave NaN/Inf" in w for w in warnings), warnings
    assert results[1]["_log"] == [], results[1]["_log"]
