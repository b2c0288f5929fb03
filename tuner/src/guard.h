// The convergence guard as a session sees it: what a config that changes numerics (compression) must
// show before the search may rank it, and what showing it cost. Its checks are
// acspeed/tuner/convergence_guard.h (gradient fidelity, loss trajectory) and acspeed/tuner/inflation.h
// (step inflation); this component owns, for one session:
//   - the reference: the uncompressed run every compressed trajectory is judged against, one per
//     session (the search's start when it is uncompressed and not measured yet, then a search
//     trial; else DDP's defaults), or a resumed session's stored one;
//   - the window and trajectory per numerics (numerics_key): the first search trial of a numerics
//     measures them, every later trial of it (search or decision pair) carries them and names the
//     trial that measured them;
//   - the verdicts: each search trial of a compressed config is judged; a later search trial of a
//     numerics it rejected is not run (the verdict could not differ) and is stored as failed;
//   - the ranking: a compressed config is ranked by its step x the upper end of its inflation, or not
//     at all when that end is unbounded (decision_rule.h);
//   - its cost: the windows and trajectories the workers timed ("fidelity_s", "trajectory_s").
// The session calls it before a trial (what to measure, or the known verdict), after it (carry,
// count, judge) and at the end (its cost; the candidate's inflation and bar; why the fastest step
// was not ranked first).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "acspeed/config.h"
#include "acspeed/tuner/search_space.h"
#include "acspeed/tuner/session.h"
#include "decision_rule.h"
#include "measured.h"
#include "protocol.h"

namespace acspeed::tuner {

struct GuardOptions {
  bool active = false;        // a compression that changes numerics is searched
  int trajectory_steps = 0;   // T of every trajectory (TuneOptions::trajectory_steps)
  uint64_t seed = 0;          // the inflation bootstrap's (the session's seed)
  std::string data;           // how the trajectories' batches are made, as the verdict records it
};
GuardOptions guard_options(const TuneOptions& options);

// What a compressed config's window and trajectory depend on: its numerics (compression, PowerSGD
// rank and start step, hierarchical or flat), not its buckets or lanes.
std::string numerics_key(const CommConfig& config);

// The fastest ranked search result that changes no numerics, or nullptr.
const Measured* best_exact(const std::vector<Measured>& search);

// What one trial measures for the guard, decided before it runs.
struct GuardPlan {
  int fidelity_steps = 0;    // the request's: > 0 measures the window
  int trajectory_steps = 0;  // the request's: > 0 runs the trajectory
  bool judged = false;       // a search trial: judged after it runs
  std::string window;        // the numerics whose cached window and trajectory it carries ("": none)
  bool skip = false;         // not run: its numerics was rejected on that window and trajectory
};

// The run that gives the guard its reference.
struct ReferenceRun {
  CommConfig config;
  bool search = false;                    // the search's start: a search trial, measured_ keeps it
  std::optional<size_t> candidate_index;  // its ordinal in the space, when a search trial
  std::string label;
};

class ConvergenceGuard {
 public:
  using Note = std::function<void(const std::string&)>;
  ConvergenceGuard(GuardOptions options, Note note);

  // Before the search: nullopt when no reference run is needed (nothing compressed is searched, or a
  // resumed search result has the uncompressed trajectory: adopted), else the run to make; its
  // result goes to reference_measured(), which throws Error when it gave no trajectory.
  std::optional<ReferenceRun> reference_to_run(const std::vector<Measured>& search, const SearchSpace& space);
  void reference_measured(const Measured& run);
  // A resumed session's trials: its search results judged again against the reference, and the
  // windows they and the stored decision-pair runs measured, kept for reuse.
  void resume(std::vector<Measured>& search, const std::vector<PairTrial>& pairs);

  // Before a trial of `config` (`search`: a search trial).
  GuardPlan before(const CommConfig& config, TrialMode mode, bool search) const;
  // After it (`ran`: the workers answered, m.metrics are theirs; or plan.skip): counts what the
  // workers timed, carries the window, fills a skipped trial, judges a search trial (its verdict,
  // inflation, status and ranking_cost) and keeps the window it measured.
  void after(const GuardPlan& plan, bool ran, Measured& m);

  // At the end: what the guard added to the session (nullopt when nothing), against its wall time.
  std::optional<std::string> cost_note(double session_s) const;
  // The candidate's inflation and the bar of the decision rule (decision_rule.h).
  CandidateEvidence evidence_for(const Measured& candidate, const std::vector<Measured>& search) const;
  // "; the fastest step, CONFIG (STEP), was ranked lower|out: its step inflation is ..." when a
  // compressed config had the fastest step and is not `best`; "" otherwise.
  std::string fastest_step_note(const Measured& best, const std::vector<Measured>& search) const;

 private:
  struct Window {
    int64_t ordinal = 0;  // the trial that measured it
    TrialMetrics metrics;
  };
  void judge(Measured& m) const;
  void keep_window(const Measured& m);

  GuardOptions o_;
  Note note_;
  std::optional<TrialMetrics> reference_;
  bool reference_pending_ = false;
  std::map<std::string, Window> windows_;  // by numerics_key, the first measured
  struct Cost {
    int windows = 0, trajectories = 0;
    double fidelity_s = 0, trajectory_s = 0;
  } cost_;  // this run's (trials resumed from the store not counted)
};

}  // namespace acspeed::tuner
