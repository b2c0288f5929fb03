"""Online tuning inside the user's own job (acspeed.online, docs/online.md): 2 ranks on gloo with the
test-only clock seam forcing window times; the C++ driver decides. Also the clocks, and when online
tuning runs."""
import json
import sqlite3

import pytest

from ddp_harness import run_ranks
import online_scenarios
from test_hook_equivalence import TOLERANCE_4_RANKS

ranks = pytest.mark.slow  # multi-process


@ranks
def test_every_rank_switches_at_the_same_step_and_the_forced_faster_candidate_wins():
    results = run_ranks(online_scenarios.chooses_the_faster, 2)
    first, second = results
    # Every rank switched at the same steps to the same configs and reduced every step alike.
    assert first["switches"] == second["switches"] and len(first["switches"]) >= 4, first
    assert first["steps"] == second["steps"], (first["steps"], second["steps"])
    for step, ordinal in first["switches"]:
        assert first["steps"][step] != first["steps"][step - 1], (step, first["steps"])
    _assert_windows_ran_as_built(first["windows"], second["windows"])
    # The candidate made faster from window 4 on (first run there) won, judged over >= 3 pairs.
    window, x = first["x"]
    assert window >= 4 and first["first_x_window"] == window and second["x"] == first["x"], first
    assert first["decision"] == x, (first["decision"], x)
    assert first["final"] == second["final"] == first["decision"]
    evidence = first["evidence"]
    assert len(evidence["pairs"]) >= 3 and evidence["speedups"]["step_speedup"]["ci_low"] > 1, evidence
    assert first["ran"] == second["ran"] < 400


def _assert_windows_ran_as_built(*ranks_windows) -> None:
    """Every rank ran every window alike: a config that needs no comm hook (the job's own DDP, a
    bucket size alone) on a reducer without any comm hook (DDP's logger names none, acspeed's hook
    ran in none of its steps), one that needs a hook through acspeed's hook with that config."""
    assert all(windows == ranks_windows[0] for windows in ranks_windows), ranks_windows
    for config, needs_hook, own, seen, _ in ranks_windows[0]:
        hooks, reduced = {hook for hook, _, _ in seen}, {acspeed for _, _, acspeed in seen}
        if needs_hook:
            assert hooks == {"comm_hook"} and reduced == {config}, (config, seen)
        else:
            assert hooks == {None} and reduced == {None}, (config, seen)
    assert any(own for _, _, own, _, _ in ranks_windows[0]), ranks_windows[0]
    assert any(needs_hook for _, needs_hook, _, _, _ in ranks_windows[0]), ranks_windows[0]


@ranks
@pytest.mark.parametrize("world_size", [2, 4])
def test_parameters_match_online_off_while_algorithm_streams_and_bucket_size_switch(world_size):
    results = run_ranks(online_scenarios.identical_to_online_off, world_size, timeout=360)
    windows = results[0]["windows"]
    # Counted from the stored session's windows: each knob switched at least once.
    for knob, name in enumerate(("algorithm", "streams", "bucket size")):
        changes = sum(a[knob] != b[knob] for a, b in zip(windows, windows[1:]))
        assert changes >= 1, (name, windows)
    assert {w[2] for w in windows} == {5, 25}, windows
    # Baseline windows ran without any comm hook, candidates through acspeed's; each on a reducer with
    # its config's buckets.
    _assert_windows_ran_as_built(*(result["windows_as_run"] for result in results))
    for config, _, _, seen, cap_mb in results[0]["windows_as_run"]:
        assert {cap for _, cap, _ in seen} == {int((cap_mb or 25) * 1024 * 1024)}, (config, seen)
    # Every rebuild (every rank alike) was made at the first step of a measured window whose first
    # steps the driver discarded (the one-bucket step without overlap among them), or where no window
    # is measured: the window before the decision, the decision.
    spans = results[0]["spans"]
    rebuilt = results[0]["rebuilds"]
    assert rebuilt and all(result["rebuilds"] == rebuilt for result in results), rebuilt
    for step in rebuilt:
        assert step in (spans["unmeasured_from"], spans["decision_from"]) or spans["discarded"].get(step) == \
            online_scenarios.WINDOWS["discard_steps"], (step, spans)
    assert any(step in spans["discarded"] for step in rebuilt), (rebuilt, spans)
    for result in results:
        assert result["done"] and result["switches"] == results[0]["switches"], result["switches"]
        # The decision (reduce_scatter, 2 streams, 5 MiB) ended with its own buckets and acspeed's hook.
        assert result["final"] == ("reduce_scatter", 2, 5), result["final"]
        assert result["cap"] == 5 * 1024 * 1024 and result["hooked"] and result["pre_hooks"] == 0, result
        if world_size == 2:
            assert result["equal"], result["difference"]
        else:  # gloo's ring sums in an order that depends on the bucket's size
            assert result["difference"] <= TOLERANCE_4_RANKS, result["difference"]


@ranks
def test_the_settled_job_is_what_the_next_run_builds(tmp_path):
    results = run_ranks(online_scenarios.end_state_is_what_the_next_run_builds, 2, str(tmp_path))
    # While exploring, a candidate of a bucket size alone ran without any comm hook, as the baseline.
    _assert_windows_ran_as_built(*(result["bucket"]["windows_as_run"] for result in results))
    ran = results[0]["bucket"]["windows_as_run"]
    assert any(not needs_hook and not own and cap_mb == 5 for _, needs_hook, own, _, cap_mb in ran), ran
    for result in results:
        bucket = result["bucket"]
        assert bucket["decided"] == "bucket 5 MiB, allreduce" and not bucket["needs_hook"], bucket
        # No hook of acspeed's, the lanes released, the pre-hook gone, the same buckets as a DDP built
        # from the stored decision (after both rebuilt their buckets from the gradients' order).
        assert bucket["state"] is None and bucket["fresh_state"] is None, bucket
        assert bucket["lanes"] == 0 and bucket["pre_hooks"] == 0, bucket
        assert bucket["after_settling"] == [[None, 5 * 1024 * 1024, None]] * 3, bucket
        tuned, fresh = bucket["logging"]
        assert tuned == fresh and tuned["bucket_cap_bytes"] == 5 * 1024 * 1024 and tuned["comm_hook"] is None, bucket
        tuned_buckets, fresh_buckets = bucket["buckets"]
        assert tuned_buckets == fresh_buckets and len(tuned_buckets) == 2, bucket["buckets"]
        defaults = result["defaults"]
        assert defaults["kept"] and defaults["state"] is None and defaults["lanes"] == 0, defaults
        assert defaults["pre_hooks"] == 0 and defaults["comm_hook"] is None, defaults
        assert defaults["cap"] == 25 * 1024 * 1024, defaults
        # Window collectives while exploring; none once settled.
        assert defaults["window_collectives"] > 0 and defaults["collectives_after"] == 0, defaults


@ranks
def test_without_the_rebuild_api_every_window_runs_through_acspeeds_hook_and_the_line_says_so():
    first, second = run_ranks(online_scenarios.reducer_cannot_be_rebuilt, 2)
    assert first["windows"] == second["windows"] and first["rebuilds"] == second["rebuilds"] == [], first
    assert any(own for _, _, own, _, _ in first["windows"]), first["windows"]
    for config, _, _, seen, _ in first["windows"]:  # the job's own DDP too: acspeed's plain all-reduce
        assert {(hook, acspeed) for hook, _, acspeed in seen} == {("comm_hook", config)}, (config, seen)
    start = next(line for line in first["lines"] if "tuning this job's DDP communication online" in line)
    assert "held: bucket_mb" in start and "lacks DDP's private _ddp_init_helper (test)" in start, start
    assert "the job's own DDP runs through acspeed's plain all-reduce hook while it tunes" in start, start


@ranks
def test_ddp_join_with_uneven_inputs_counts_the_same_steps_and_does_not_hang():
    first, second = run_ranks(online_scenarios.joins_with_uneven_inputs, 2, timeout=120)
    # Rank 1 joined after 35 steps; DDP's join hook shadowed rank 0's forwards, and rank 1 counted the
    # synchronised ones there: both ranks counted the same steps up to the decision.
    assert first["counted"] == second["counted"] > 35, (first, second)
    assert first["switches"] == second["switches"] and any(step > 35 for step, _ in first["switches"]), first
    # The bucket size switched (the reducer rebuilt) after rank 1 joined.
    late = [bucket for (step, _), bucket in zip(first["switches"], first["buckets"]) if step > 35]
    assert len(set(late)) == 2, (first["switches"], first["buckets"])
    assert first["rebuilds"] == second["rebuilds"] and any(step > 35 for step in second["rebuilds"]), first
    assert first["done"] and second["done"]


@ranks
def test_frontend_paths_tuned_online_give_the_parameters_of_online_off(tmp_path):
    for result in run_ranks(online_scenarios.frontends_with_online_on, 2, str(tmp_path), timeout=360):
        for path, seen in result.items():
            assert seen["equal"] and seen["done"] and seen["stopped"] is None and seen["rebuilds"] >= 2, (path, seen)
            # Every knob switched on each path: both algorithms, both stream counts, both bucket sizes.
            assert {k[0] for k in seen["knobs"]} == {"allreduce", "reduce_scatter"}, (path, seen)
            assert {k[1] for k in seen["knobs"]} == {1, 2} and {k[2] for k in seen["knobs"]} == {5, 25}, (path, seen)


@ranks
def test_one_ddp_model_per_process_and_a_users_hook_ends_tuning():
    for result in run_ranks(online_scenarios.second_model_and_settings, 2):
        assert result["off"] and result["first"], result
        assert result["second"] is None, result  # the second model: DDP defaults, no hook
        assert result["stopped"].startswith("your comm hook allreduce_hook took over"), result
        # Registered while the job's own DDP ran without acspeed's hook: theirs went on the reducer.
        assert result["hook"] == "allreduce_hook" and not result["registered"], result


@pytest.mark.parametrize("setting, source, tuned", [
    (None, "no_store", True), (None, "no_entry", True), (None, "version_mismatch", True),
    (None, "stored", False), (None, "stored_other_precision", False), (None, "forced", False), (None, "error", False),
    ("0", "no_entry", False), ("1", "stored", True), ("1", "forced", True), ("1", "disabled", False),
])
def test_when_online_tuning_runs(monkeypatch, setting, source, tuned):
    from acspeed import online
    if setting is None:
        monkeypatch.delenv("ACSPEED_ONLINE", raising=False)
    else:
        monkeypatch.setenv("ACSPEED_ONLINE", setting)
    assert online.wanted(source) is tuned


def test_a_bad_acspeed_online_is_named(monkeypatch):
    from acspeed import online
    monkeypatch.setenv("ACSPEED_ONLINE", "yes")
    with pytest.raises(ValueError, match="ACSPEED_ONLINE='yes' is not one of 0, 1"):
        online.wanted("no_entry")


class FakeEvent:
    """A CUDA event whose time is given: elapsed_time in ms, as torch's."""
    now = 0.0

    def __init__(self):
        self.stream = self.at = None
        self.synchronized = False

    def record(self, stream):
        self.stream, self.at = stream, FakeEvent.now

    def synchronize(self):
        self.synchronized = True

    def elapsed_time(self, end):
        return (end.at - self.at) * 1000.0


def test_the_cuda_clock_reads_events_on_the_current_stream_at_the_boundary():
    from acspeed import online
    made = []

    def event():
        made.append(FakeEvent())
        return made[-1]

    clock = online.CudaClock(None, event=event, stream=lambda: "current")
    for at in (0.0, 0.25, 0.75, 1.0):
        FakeEvent.now = at
        clock.mark(0, None)
    assert [e.stream for e in made] == ["current"] * 4
    assert not any(e.synchronized for e in made[:-1])
    assert clock.take() == pytest.approx([0.25, 0.5, 0.25]) and made[-1].synchronized
    FakeEvent.now = 1.5
    clock.mark(1, None)
    assert clock.take() == pytest.approx([0.5])  # from the boundary's event on


@ranks
def test_a_settled_decision_is_stored_as_an_online_session_and_the_next_run_applies_it(tmp_path):
    db = str(tmp_path / "acspeed.db")
    first = run_ranks(online_scenarios.remembers_the_decision, 2, 1, env={"ACSPEED_DB": db})
    stored = first[0]["stored"]
    assert stored is not None and stored["active"], first[0]["lines"]
    assert any(f"stored as decision #{stored['decision_id']}" in line and db in line for line in first[0]["lines"])
    with sqlite3.connect(db) as store:
        kind, model, batch = store.execute("SELECT kind, model_name, batch_size FROM sessions WHERE id = ?",
                                           (stored["session_id"],)).fetchone()
        precision, active = store.execute("SELECT precision, active FROM decisions WHERE id = ?",
                                          (stored["decision_id"],)).fetchone()
        trials = store.execute("SELECT role, COUNT(*) FROM trials WHERE session_id = ? GROUP BY role",
                               (stored["session_id"],)).fetchall()
    assert (kind, model, batch, precision, active) == ("online", "torch.nn.modules.container.Sequential", 16, "fp32", 1)
    assert dict(trials)["candidate"] >= 3 and dict(trials)["baseline"] >= 3, trials
    # Each stored window says where it ran among the job's steps: after the warm-up, tiling the
    # exploration, and starting exactly where the job switched configs; the window before the decision
    # (no boundary collective: not measured) and the decision start at the other switches.
    with sqlite3.connect(db) as store:
        rows = store.execute("SELECT metrics_json FROM trials WHERE session_id = ? ORDER BY ordinal",
                             (stored["session_id"],)).fetchall()
        options = json.loads(store.execute("SELECT options_json FROM sessions WHERE id = ?",
                                           (stored["session_id"],)).fetchone()[0])
    spans = [(w["first_step"], w["first_step"] + w["steps"]) for w in
             (json.loads(metrics)["online_window"] for (metrics,) in rows)]
    assert spans[0][0] == online_scenarios.WINDOWS["warmup"], spans
    assert all(end == start for (_, end), (start, _) in zip(spans, spans[1:])), spans
    switched = {step for step, _ in first[0]["switches"]}
    decision_from = options["online"]["decision_from_step"]
    assert decision_from > spans[-1][1], (decision_from, spans)
    assert switched <= {start for start, _ in spans} | {spans[-1][1], decision_from}, (switched, spans)
    # The second run of the same job: the decision from its first step, no tuning, no window collective.
    for result in run_ranks(online_scenarios.remembers_the_decision, 2, 2, env={"ACSPEED_DB": db}):
        assert not result["tuned"] and result["algorithm"] == "reduce_scatter", result
        assert len(result["steps"]) == 3 and all("reduce_scatter" in step[2] for step in result["steps"]), result


@ranks
def test_a_job_that_ends_before_settling_stores_nothing_and_says_so(tmp_path):
    db = tmp_path / "acspeed.db"
    first, _ = run_ranks(online_scenarios.ends_before_settling, 2, env={"ACSPEED_DB": str(db)})
    assert first["done"]
    assert any(line.startswith("online tuning did not settle before the job ended (8 steps") and
               "nothing was stored" in line for line in first["lines"]), first["lines"]
    assert not db.exists()


@ranks
def test_a_config_whose_lanes_cannot_be_built_stops_tuning_on_every_rank():
    first, second = run_ranks(online_scenarios.a_switch_that_cannot_be_set_up, 2)
    for result in (first, second):
        assert "could not be set up" in result["stopped"] and "injected on rank 1" in result["stopped"], result
        assert result["switches"] == [] and result["stepper"], result
        # Its own DDP throughout: without any hook, but for the step whose switch failed at bucket 0,
        # reduced by acspeed's hook with the job's own config (allreduce, 1 stream).
        steps = [tuple(step) for step in result["steps"]]
        assert len(steps) == 40 and len({step for step in steps if step[0] is None}) == 1, steps
        hooked = [step for step in steps if step[0] is not None]
        assert len(hooked) == 1 and hooked[0][0] == "comm_hook" and "allreduce" in hooked[0][2], steps
    assert first["params"].equal(second["params"])
    assert any(line.startswith("online tuning stopped:") for line in first["lines"]), first["lines"]
