// The decision rule: when the best configuration of the search replaces DDP's defaults.
//
// The candidate runs again alternated with DDP's defaults in the same workers (DESIGN.md,
// "Statistics"): one sample = one (candidate, baseline) pair, its speedup = baseline median step
// time / candidate median step time (statistics.h: pair_speedup). The candidate is kept only if
//   - every run of every pair completed,
//   - after each pair its loss is within the loss tolerance of the baseline's (same weights, same
//     batches: an exact algorithm should match), or, for a config that changes numerics
//     (compression), it passes the convergence guard against that pair's baseline
//     (convergence_guard.h: gradient fidelity and the loss trajectory), and
//   - the 95% Student-t interval of the mean log pair speedup lies above 1 (at least two pairs).
// Otherwise "keep DDP defaults" is the decision, with the reason. The session (session.cc) runs the
// pairs and stores what this rule says.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "acspeed/config.h"
#include "acspeed/tuner/trial_metrics.h"

namespace acspeed::tuner {

// How the interval is computed, as the evidence records it.
inline constexpr const char* kDecisionMethod = "Student t 95% interval of the mean log pair speedup";

// One alternated pair of the decision phase.
struct PairRun {
  bool candidate_first = true;
  std::vector<double> candidate_steps_s;  // raw step times (max over ranks per step)
  std::vector<double> baseline_steps_s;
  std::optional<double> candidate_loss, baseline_loss, baseline_loss_first;
  TrialMetrics candidate_metrics, baseline_metrics;  // the runs' metrics (the guard's evidence)
  nlohmann::json guard;                              // compressed candidates: the guard's verdict on this pair
};
// The evidence entry of a pair: its order, both runs' step times and losses, its speedup.
void to_json(nlohmann::json& j, const PairRun& pair);

struct RuleOptions {
  double loss_tolerance = 0.05;  // statistics.h: loss_within_tolerance
  uint64_t seed = 0;             // the session's seed (recorded with the interval)
};

// Why `candidate` is out after this pair: its loss is beyond the tolerance, or (compressed) the
// convergence guard fails it, whose evidence goes to pair.guard; "" when it is not.
std::string pair_rejection(const CommConfig& candidate, PairRun& pair, const RuleOptions& options);

struct Verdict {
  bool accepted = false;
  std::string note;  // the decision's note: the speedup and interval, or why DDP's defaults stay
  std::optional<double> speedup, ci_low, ci_high;
  std::vector<double> pair_speedups;
};

// The verdict on `candidate` from the pairs that completed; `stopped_because` says why the pairs
// ended early (a failed run, pair_rejection's reason), "" when every pair ran. A candidate that is
// DDP's defaults (the fastest configuration measured) is kept without pairs.
Verdict judge(const CommConfig& candidate, const std::vector<PairRun>& pairs, const std::string& stopped_because,
              const RuleOptions& options);

}  // namespace acspeed::tuner
