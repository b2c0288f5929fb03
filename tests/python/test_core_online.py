"""The online tuner across pybind11 (tuner/include/acspeed/tuner/online.h): Python only counts steps,
times them and pushes them; the plan of each window, the pairs, the verdict and its evidence come from
C++. Also the knob rows Python reads instead of a list of its own. No processes; well under a second."""
import json

import pytest

from acspeed import _runtime


@pytest.fixture()
def core():
    return _runtime.core()


def drive(tuner, step_time):
    """Runs windows as the hook engine will (lookahead 0: push window k, then plan k + 1)."""
    k = 0
    while True:
        plan = tuner.window(k)
        if plan.settled:
            return k
        tuner.push(k, [step_time(plan.config)] * plan.steps)
        k += 1
        assert k < 200, "never settled"


def test_knob_rows_say_which_knobs_a_live_job_can_switch(core):
    switchable = {knob.name for knob in core.KNOBS if knob.switchable}
    assert switchable == {"bucket_mb", "algorithm", "streams", "nccl_algorithm", "nccl_protocol", "nccl_channels",
                          "nccl_chunk_bytes"}  # the NCCL rules reach a live job through the plugin's setter
    assert not any(knob.switchable and knob.before_communicator for knob in core.KNOBS)
    assert {knob.ddp_argument for knob in core.KNOBS if knob.ddp_argument} == {"bucket_cap_mb",
                                                                               "gradient_as_bucket_view"}


def test_the_tuner_settles_on_the_faster_config_with_the_offline_evidence(core):
    tuner = core.OnlineTuner("{}", nnodes=2, world_size=4, seed=5)
    assert tuner.baseline.is_default()
    first = tuner.window(0)
    assert (first.role, first.discard, first.steps) == ("baseline", 0, 10)
    windows = drive(tuner, lambda config: 0.7 if config.streams == 2 else 1.0)
    assert tuner.settled and tuner.decision.streams == 2
    assert tuner.speedup == pytest.approx(1 / 0.7)
    assert tuner.ci_low > 1
    assert windows * 12 <= tuner.max_exploration_steps
    evidence = json.loads(tuner.evidence())
    assert evidence["candidate"]["streams"] == 2 and evidence["seed"] == 5
    assert len(evidence["pairs"]) == 3 and evidence["speedups"]["step_speedup"]["ci_low"] > 1
    records = json.loads(tuner.windows())
    assert sorted({r["trial_role"] for r in records}) == ["baseline", "candidate", "search"]
    assert len(json.loads(tuner.configs())) == 12  # bucket 5, 25 x 3 algorithms x streams 1, 2
    # nodes of one rank: hierarchical would be allreduce again (knobs.cc), not searched
    one_rank = json.loads(core.OnlineTuner("{}", nnodes=2, world_size=2).configs())
    assert len(one_rank) == 8 and {c["algorithm"] for c in one_rank} == {"allreduce", "reduce_scatter"}


def test_the_jobs_own_ddp_arguments_are_pinned_and_bad_ones_named(core):
    tuner = core.OnlineTuner('{"bucket_cap_mb": 50}', nnodes=2)
    assert tuner.baseline.bucket_cap_mb == 50
    assert all(config["bucket_cap_mb"] == 50 for config in json.loads(tuner.configs()))
    with pytest.raises(ValueError, match="'broadcast_buffers'.*bucket_cap_mb, gradient_as_bucket_view"):
        core.OnlineTuner('{"broadcast_buffers": false}', nnodes=2)
    tuner = core.OnlineTuner("{}", nnodes=2)
    tuner.window(0)
    with pytest.raises(ValueError, match="ran 10 steps, 3 step times"):
        tuner.push(0, [1.0, 1.0, 1.0])
