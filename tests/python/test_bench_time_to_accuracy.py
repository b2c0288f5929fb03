"""bench/compression/bench_time_to_accuracy.py's analysis on curves with known answers, and the
committed result recomputed from its own raw curves (every figure of bench/compression/RESULTS.md's
time-to-accuracy table can be recomputed from the tree)."""
import json
import math
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "compression"))
import bench_time_to_accuracy as tta  # noqa: E402


def curve(accuracies, step_s, every=10):
    """[(step, wall_s, accuracy)] evaluated every `every` steps of `step_s` seconds."""
    return [(every * (i + 1), every * (i + 1) * step_s, acc) for i, acc in enumerate(accuracies)]


def raw(arms: dict, seeds: int = 2) -> dict:
    return {"arms": list(arms), "seeds": seeds, "tuner_inflation": {},
            "curves": {f"{name}-{seed}": curve(*arms[name]) for name in arms for seed in range(1, seeds + 1)}}


RISING = [0.2, 0.5, 0.7, 0.8, 0.9, 0.95, 0.96, 0.97, 0.97, 0.97]


def test_a_twice_faster_step_with_the_same_curve_is_twice_as_fast_to_the_target():
    result = tta.analyse(raw({"plain": (RISING, 0.4), "tuned": (RISING, 0.2)}), smooth=1)
    assert result["target_accuracy"] == pytest.approx(0.97)
    tuned = result["arms"]["tuned"]
    assert tuned["time_to_target_vs_plain"]["estimate"] == pytest.approx(2.0)
    assert tuned["measured_inflation"] == [pytest.approx(1.0)] * 2
    assert tuned["final_accuracy_points_below_plain"] == pytest.approx(0.0)


def test_a_run_that_needs_more_steps_shows_its_inflation_and_never_reaching_counts_nothing():
    stretched = [0.2, 0.35, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.96, 0.97, 0.97]
    stuck = [0.2, 0.5, 0.7, 0.8, 0.85, 0.86, 0.86, 0.86, 0.86, 0.86]
    result = tta.analyse(raw({"plain": (RISING, 0.4), "slow": (stretched, 0.2), "stuck": (stuck, 0.1)}), smooth=1)
    slow = result["arms"]["slow"]
    assert slow["measured_inflation"] == [pytest.approx(12 / 8)] * 2  # 120 steps against 80
    assert slow["time_to_target_vs_plain"]["estimate"] == pytest.approx(80 * 0.4 / (120 * 0.2))
    stuck_arm = result["arms"]["stuck"]
    assert stuck_arm["reached_target"] == 0 and stuck_arm["time_to_target_vs_plain"] is None
    assert stuck_arm["final_accuracy_points_below_plain"] == pytest.approx(11.0)
    assert stuck_arm["final_accuracy_points_below_plain_ci"] == [pytest.approx(11.0)] * 2  # the same on both seeds


def test_final_accuracy_differences_are_paired_by_seed_with_an_interval():
    curves = {"plain-1": curve([0.5, 0.98], 0.4), "plain-2": curve([0.5, 0.96], 0.4),
              "arm-1": curve([0.5, 0.97], 0.2), "arm-2": curve([0.5, 0.95], 0.2)}
    result = tta.analyse({"arms": ["plain", "arm"], "seeds": 2, "tuner_inflation": {}, "curves": curves}, smooth=1)
    arm = result["arms"]["arm"]
    assert arm["final_accuracy_points_below_plain"] == pytest.approx(1.0)
    # one point below on each seed: no spread, although the seeds' own accuracies differ by two points
    assert arm["final_accuracy_points_below_plain_ci"] == [pytest.approx(1.0)] * 2
    curves["arm-2"] = curve([0.5, 0.97], 0.2)  # now 1 and -1: the interval spans 0 widely (t = 12.7)
    arm = tta.analyse({"arms": ["plain", "arm"], "seeds": 2, "tuner_inflation": {}, "curves": curves},
                      smooth=1)["arms"]["arm"]
    low, high = arm["final_accuracy_points_below_plain_ci"]
    assert arm["final_accuracy_points_below_plain"] == pytest.approx(0.0) and low < -10 and high > 10


def test_one_lucky_evaluation_does_not_reach_the_target_under_the_trailing_mean():
    spiky = [0.2, 0.5, 0.97, 0.7, 0.8, 0.9, 0.95, 0.96, 0.97, 0.97, 0.97]
    result = tta.analyse(raw({"plain": (RISING, 0.4), "spiky": (spiky, 0.4)}), smooth=1, target=0.97)
    assert result["arms"]["spiky"]["runs"][0]["reached"][0] == 30  # the spike, when one evaluation decides
    result = tta.analyse(raw({"plain": (RISING, 0.4), "spiky": (spiky, 0.4)}), smooth=3, target=0.97)
    assert result["arms"]["spiky"]["runs"][0]["reached"][0] == 110  # three in a row at 0.97


def _same(got, want) -> bool:
    """got == want, floats within 1e-12 of each other (relative)."""
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(_same(got[k], want[k]) for k in got)
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(_same(a, b) for a, b in zip(got, want))
    if isinstance(got, float) and isinstance(want, (int, float)):
        return math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-300)
    return got == want


@pytest.mark.parametrize("name, tuned_ratio", [("2026-12-05T0104_quiet_run_time_to_accuracy", (1.80, 1.40, 2.33)),
                                               ("2026-12-05T0302_quiet_run_time_to_accuracy_ranks_4_8_16",
                                                (1.84, 1.44, 2.34)),
                                               ("2026-12-05T0356_quiet_run_time_to_accuracy_model10_t120",
                                                (3.36, 2.56, 4.42)),
                                               ("2026-12-05T0442_quiet_run_time_to_accuracy_model10_cosine",
                                                (2.89, 1.66, 5.01)),
                                               ("time_to_accuracy_model10_cosine_rerun_2026-12-07T1934",
                                                (1.39, 0.94, 2.05)),
                                               ("time_to_accuracy_model10_cosine_rerun_2026-12-07T2340",
                                                (1.67, 1.52, 1.83)),
                                               ("time_to_accuracy_model10_cosine_rerun_2026-12-08T0202",
                                                (1.56, 1.51, 1.60)),
                                               ("time_to_accuracy_model10_cosine_rerun_2026-12-08T0303",
                                                (1.68, 1.60, 1.77))])
def test_the_committed_result_is_recomputed_from_its_raw_curves(name, tuned_ratio):
    stored = json.loads((REPO / "bench" / "compression" / "results" / f"{name}.json").read_text())
    again = tta.analyse(stored, stored["analysis"]["smooth_evals"])
    # (JSON turns tuples into lists; sums round in the last digit differently across numpy versions)
    assert _same(json.loads(json.dumps(again)), stored["analysis"])
    tuned = again["arms"]["tuned"]["time_to_target_vs_plain"]
    assert (round(tuned["estimate"], 2), round(tuned["ci_low"], 2), round(tuned["ci_high"], 2)) == tuned_ratio
