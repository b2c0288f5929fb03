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
//   - the order: before the search strategy's own points, one trial per numerics family asked for
//     (each compression, each PowerSGD rank) that has no verdict yet, at the search's start with
//     that family's numerics: casts first (their curves follow the uncompressed one, one trajectory
//     decides), then PowerSGD from the highest rank down (the nearer to exact, the likelier one
//     trajectory decides). So every family is measured before any gets a second trial; these trials
//     run whatever the time budgets say (a --compression session may end past its budgets by them);
//   - the verdicts: each search trial of a compressed config is judged; a later search trial of a
//     numerics it rejected is not run (the verdict could not differ) and is stored as failed; such a
//     skip costs no time and never ends the search (session.cc checks the budget only before a run);
//   - more evidence for an undecided verdict: when the inflation interval is too wide to decide (the step speedup over
//     the reference divided by the least inflation the interval allows clears the bar, divided by its upper end it does
//     not), or the loss check failed within its noise (the numerics' only failure, by no more than 2x the standard
//     error of the tails' difference: convergence_guard.h), the reference's and that numerics' trajectories are run
//     again, twice as long, up to kTrajectoryCapFactor x T (convergence_guard.h), within the guard's own time budget
//     (kGuardBudgetFactor: the session times the guard's evidence apart from the search's trials), and every trial of
//     that numerics is judged again on them, by the same rules. The least inflation is the interval's lower end, taken
//     no lower than 1 (a lossy compression does not speed convergence up: an end below 1 is noise, and a step slower
//     than the bar is decided at once), not its point estimate: on short trajectories the estimate can sit anywhere in
//     the interval (resnet18's PowerSGD rank 16 at 120 steps: 1.84x [0.32, 5.34]; at 240, 1.03x [0.81, 1.34]), and a
//     verdict that waited on it was extended or not as one noisy trial's step fell either side of the bar / 1.84; one
//     still undecided is not ranked (never chosen), and its verdict says why ("undecided"); a loss check that fails on
//     the longest trajectories the guard may run, or when the budget declined them, is a rejection;
//   - a near-exact numerics whose trajectories agree with its fidelity bound (inflation.h) has a
//     failure of its loss check alone overruled (convergence_guard.h: the tails' gap is the runs'
//     divergence); the loss check's evidence says so ("overruled");
//   - the ranking: a compressed config is ranked by its step x the upper end of its inflation, or not
//     at all when that end is unbounded or its verdict is undecided (decision_rule.h); a certified
//     verdict (passed and decided) makes a config a fallback when the decision rejects a candidate;
//   - its cost: the windows and trajectories the workers timed ("fidelity_s", "trajectory_s").
// The session calls it before a trial (what to measure, or the known verdict), after it (carry,
// count, judge; extend what is undecided) and at the end (its cost; the candidate's inflation and
// bar; the fallback; why the fastest step was not ranked first).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "acspeed/config.h"
#include "acspeed/tuner/convergence_guard.h"
#include "acspeed/tuner/search_space.h"
#include "acspeed/tuner/session.h"
#include "decision_rule.h"
#include "measured.h"
#include "protocol.h"

namespace acspeed::tuner {

struct GuardOptions {
  bool active = false;        // a compression that changes numerics is searched
  int trajectory_steps = 0;   // T of every trajectory (TuneOptions::trajectory_steps)
  int trajectory_cap = 0;     // steps an extended trajectory may reach (kTrajectoryCapFactor x T)
  uint64_t seed = 0;          // the inflation bootstrap's (the session's seed)
  std::string data;           // how the trajectories' batches are made, as the verdict records it
  int ranks_per_node = 1;     // the workers' (TuneOptions::nproc_per_node): see numerics_key
};
GuardOptions guard_options(const TuneOptions& options);

// What a compressed config's window and trajectory depend on: its numerics (compression, PowerSGD
// rank and start step, hierarchical or flat), not its buckets or lanes. Hierarchical is a numerics of
// its own only where it does not reduce as the flat all-reduce does (reduces_as_flat,
// acspeed/comm_methods.h: one rank per node), so the two share one window and trajectory instead of
// training the same curves twice.
std::string numerics_key(const CommConfig& config, int ranks_per_node);

// The fastest ranked search result that changes no numerics, or nullptr.
const Measured* best_exact(const std::vector<Measured>& search);

// What one trial measures for the guard, decided before it runs.
struct GuardPlan {
  bool extension = false;    // one of the guard's own runs that extends a trajectory (see extension())
  int fidelity_steps = 0;    // the request's: > 0 measures the window
  int trajectory_steps = 0;  // the request's: > 0 runs the trajectory
  bool judged = false;       // a search trial: judged after it runs
  std::string window;        // the numerics whose cached window and trajectory it carries ("": none)
  bool skip = false;         // not run: its numerics was rejected on that window and trajectory
};

// A run the guard asks for: its reference, or the extension of a trajectory.
struct GuardRun {
  CommConfig config;
  bool search = false;                    // a search trial (role search); else role baseline
  std::optional<size_t> candidate_index;  // its ordinal in the space, when a search trial of it
  std::string label;
  // An extension: what its trajectory should take (s); the reference's includes the numerics' run that
  // must follow it, so that a budget that cannot afford both declines the extension before either runs.
  double expected_s = 0;
};

class ConvergenceGuard {
 public:
  using Note = std::function<void(const std::string&)>;
  ConvergenceGuard(GuardOptions options, Note note);

  // Before the search: nullopt when no reference run is needed (nothing compressed is searched, or a
  // resumed search result has the uncompressed trajectory: adopted), else the run to make; its
  // result goes to reference_measured(), which throws Error when it gave no trajectory.
  std::optional<GuardRun> reference_to_run(const std::vector<Measured>& search, const SearchSpace& space);
  void reference_measured(const Measured& run);
  // A resumed session's trials: its search results judged again against the reference, and the
  // windows they and the stored decision-pair runs measured, kept for reuse.
  void resume(std::vector<Measured>& search, const std::vector<PairTrial>& pairs);

  // Before a trial of `config` (`search`: a search trial).
  GuardPlan before(const CommConfig& config, TrialMode mode, bool search) const;
  // The search's first points: one per numerics family asked for without a verdict (see above).
  std::vector<Point> first_points(const SearchSpace& space) const;
  // What a config's step is multiplied by to rank it, as far as the guard knows before it runs: 1 for
  // a config that changes no numerics or whose numerics has no verdict yet; once its numerics was
  // judged, the upper end of its inflation (a config of an undecided numerics fast enough to rank
  // at that cost is decided at it: its step speedup over that end clears the bar), or kFailedCost
  // when it was rejected or its inflation has no upper bound (never ranked). The model strategy
  // forecasts ranking costs with it (session.cc), so that the budget measures a compressed config
  // only where its step could rank it first.
  double ranking_factor(const CommConfig& config) const;
  // What a trial with this plan should spend on the guard's window and trajectory, in seconds: their
  // steps at the reference trajectory's time per step (0 before the reference ran, or with nothing to
  // measure). The session's budget counts it on top of a plain trial's time.
  double expected_s(const GuardPlan& plan) const;
  // After it (`ran`: the workers answered, m.metrics are theirs; or plan.skip): counts what the
  // workers timed, carries the window, fills a skipped trial, judges a search trial (its verdict,
  // inflation, status and ranking_cost) and keeps the window it measured.
  void after(const GuardPlan& plan, bool ran, Measured& m);
  // After a search trial: the next run that extends an undecided verdict (the reference's trajectory
  // first, then the numerics'), or nullopt; `search` (the session's results) is judged again once a
  // numerics' trajectory was extended. decline() gives the pending extension up (the budget), with why.
  std::optional<GuardRun> extension(std::vector<Measured>& search);
  void decline(const std::string& why);

  // At the end: what the guard added to the session (nullopt when nothing), against its wall time.
  std::optional<std::string> cost_note(double session_s) const;
  // The candidate's inflation and the bar of the decision rule (decision_rule.h).
  CandidateEvidence evidence_for(const Measured& candidate, const std::vector<Measured>& search) const;
  // When the decision rejected the configs `rejected`: the best-ranked search result whose verdict is
  // certified (an exact config, or a compressed one that passed with a bounded, decided inflation: a
  // ranked one) of a numerics none of them had; nullptr when there is none.
  const Measured* fallback(const std::vector<CommConfig>& rejected, const std::vector<Measured>& search) const;
  // "; the fastest step, CONFIG (STEP), was ranked lower|out: its step inflation is ..." when a
  // compressed config had the fastest step and is not `best`; "" otherwise.
  std::string fastest_step_note(const Measured& best, const std::vector<Measured>& search) const;

 private:
  std::string key_of(const CommConfig& config) const { return numerics_key(config, o_.ranks_per_node); }
  struct Window {
    int64_t ordinal = 0;  // the trial that measured it
    TrialMetrics metrics;
    CommConfig config;    // its config (an extension runs it again)
  };
  // An undecided verdict's extension: from the trajectory's steps to `steps`, and why.
  struct Extension {
    std::string numerics;
    int from = 0, steps = 0;
    std::string why;
    std::string declined;  // why it was given up ("" when made)
  };
  void judge(Measured& m);
  void extended(const GuardPlan& plan, bool ran, Measured& m);
  void keep_window(const Measured& m);
  std::string undecided_why(const TrialMetrics& m) const;  // a passed verdict's: "" when it is decided
  GuardOptions o_;
  Note note_;
  std::optional<TrialMetrics> reference_;
  bool reference_pending_ = false;
  double best_exact_s_ = 0;                   // the fastest uncompressed search step so far (the bar)
  std::optional<Extension> pending_;          // an extension asked for, not finished
  std::map<std::string, Extension> extended_;  // by numerics: the extensions made (or declined)
  bool extending_ = false;                    // the next trial is the run extension() returned
  bool extending_numerics_ = false;           // ... of the numerics (else of the reference)
  std::optional<std::string> rejudge_;        // a numerics whose search trials extension() judges again
  std::map<std::string, Window> windows_;  // by numerics_key, the first measured
  struct Cost {
    int windows = 0, trajectories = 0, extended = 0;  // extended: trajectories of the guard's extension runs
    double fidelity_s = 0, trajectory_s = 0;
  } cost_;  // this run's (trials resumed from the store not counted)
};

}  // namespace acspeed::tuner
