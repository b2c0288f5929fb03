"""bench/compression/guard_signals.py: its committed verdicts are recomputed from its raw curves by
`acspeed-tune inflation` (every figure of its table in bench/compression/RESULTS.md comes from the
tree), and its recorded training-loss curves are the tuner's own trajectories (the same loss check
figures as the bench's tuning session printed)."""
import json
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "compression"))
import guard_signals  # noqa: E402

RESULT = REPO / "bench" / "compression" / "results" / "2026-12-05T0400_guard_signals_digits.json"


def test_the_committed_verdicts_are_recomputed_from_the_raw_curves(tune_binary):
    stored = json.loads(RESULT.read_text())
    for steps in (stored["steps"], stored["long_steps"]):
        assert guard_signals.judge(stored["curves"], steps, tune_binary) == stored["judged"][str(steps)]


def test_the_training_loss_curves_are_the_tuners_trajectories():
    # The 2026-12-05 03:02 session (acspeed-tune --model digits:model --data digits:batches, 2x1@1gbit)
    # rejected rank 4 with "0.8658 vs 0.3767 uncompressed: 0.4891 above it, allowed 0.09417".
    loss = json.loads(RESULT.read_text())["judged"]["60"]["train"]["powersgd rank 4"]["loss_check"]
    assert (round(loss["candidate_tail"], 4), round(loss["reference_tail"], 4), round(loss["allowed"], 5)) == \
        (0.8658, 0.3767, 0.09417)
