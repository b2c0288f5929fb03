// The decision rule: when the best configuration of the search replaces DDP's defaults.
//
// A faster step is not a faster training when it needs more steps. The rule decides on the
// effective speedup = step speedup / step inflation (inflation.h: the steps a compressed run needs
// to reach the uncompressed run's loss, over the steps that run needed; 1 by definition for a config
// that changes no numerics).
//
// The search ranks configs by p50 step time x the upper end of their inflation interval (p50 for
// the uncompressed ones); a compressed config whose inflation is infinite or unmeasurable is not
// ranked (not chosen, the reason says which). The best of that ranking runs again alternated with
// DDP's defaults in the same workers: one sample = one (candidate, baseline) pair, its step
// speedup = baseline median step time / candidate median step time (statistics.h: pair_speedup).
// The candidate is kept only if
//   - every run of every pair completed,
//   - after each pair its loss is within the loss tolerance of the baseline's (same weights, same
//     batches: an exact algorithm should match); a config that changes numerics (compression) is
//     not judged again in the pairs: the convergence guard judged its trajectory once
//     (convergence_guard.h), and that verdict stands,
//   - at least two pairs completed, and
//   - the lower end of the 95% Student-t interval of the mean log pair speedup, divided by the upper
//     end of the inflation interval, exceeds a bar: 1 for a config that changes no numerics;
//     max(1, the best non-compressing config's step speedup in the search) for a compressed one (a
//     compressed config must beat what the exact configs already give). That search speedup is one
//     trial of each, the fastest of ~16 noisy ones (biased up): where it alone keeps a compressed
//     candidate out (kept_out_by_bar), that exact config goes to the pairs against DDP's defaults too,
//     and the bar is max(1, its pairs' estimate), on the same footing as the candidate's (session.cc;
//     its pairs stay for the fallback). On the time-to-accuracy tune command fp16 gave 1.298x over 3
//     pairs against a search bar of 1.331, which the exact config's own pairs put at 1.164 (3 pairs), 1.140 (6).
// A candidate whose interval straddles its bar (the estimate clears it, the lower end does not:
// undecided_by_pairs) gets --repeats more pairs at a time, up to kPairsCapFactor x --repeats, within
// the budget, and is judged again on all of them by the same rule (session.cc): more evidence, not
// a rejection, as the convergence guard does for an undecided inflation.
// A compressed candidate that fails goes no further: the best non-compressing config goes to the
// pairs instead (session.cc). Otherwise "keep DDP defaults" is the decision, with the reason. The
// decision's note shows step speedup, inflation and effective speedup side by side.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "acspeed/config.h"
#include "acspeed/tuner/effective_speedup.h"
#include "acspeed/tuner/inflation.h"
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
};
// The evidence entry of a pair: its order, both runs' step times and losses, its speedup. from_json
// reads it back (a stored decision's pairs, offline or online, judged again).
void to_json(nlohmann::json& j, const PairRun& pair);
void from_json(const nlohmann::json& j, PairRun& pair);

struct RuleOptions {
  double loss_tolerance = 0.05;  // statistics.h: loss_within_tolerance
  uint64_t seed = 0;             // the session's seed (recorded with the interval)
  bool online = false;           // judged inside a training job (online.h): its notes advise acspeed-tune, not a rerun
};

// Why `candidate` is out after this pair: its loss is beyond the tolerance; "" when it is not (and
// always for a compressed candidate: the guard's verdict on its trajectory stands).
std::string pair_rejection(const CommConfig& candidate, const PairRun& pair, const RuleOptions& options);

// What the candidate brings besides its pairs: its inflation, and the bar its effective speedup's
// lower end must exceed.
struct CandidateEvidence {
  Inflation inflation = no_inflation();
  double bar = 1;  // 1, or for a compressed config max(1, the best non-compressing config's step speedup)
};

struct Verdict {
  bool accepted = false;
  std::string note;  // the decision's note: the speedups and intervals, or why DDP's defaults stay
  std::optional<double> speedup, ci_low, ci_high;  // the step speedup
  EffectiveSpeedup speedups;                       // step speedup, inflation, effective speedup, bar
  std::vector<double> pair_speedups;
};

// A candidate's pairs may grow to this many times --repeats while its verdict is undecided_by_pairs.
// On the seed command (resnet18, 2x1@1gbit) 3 pairs of fp16 gave 1.421x [1.061, 1.903] against a bar
// of 1.261: had the mean and spread held, 6 pairs would have put the lower end at 1.256, 9 at 1.298.
inline constexpr int kPairsCapFactor = 3;

// Whether more pairs could decide a verdict that did not accept its candidate: every pair completed
// (`stopped_because` empty), its inflation is bounded, and its step speedup's estimate over the
// inflation's upper end exceeds the bar while its lower end over that upper end does not (for a
// config that changes no numerics: an estimate above 1, an interval that does not exclude 1).
bool undecided_by_pairs(const Verdict& verdict, const std::string& stopped_because);

// Whether the bar alone keeps out a candidate the pairs would not: the verdict did not accept it, every
// pair completed, its inflation is bounded, its bar is above 1 and its step speedup's estimate over
// the inflation's upper end exceeds 1 (at a bar of 1 it would be accepted, or undecided_by_pairs).
bool kept_out_by_bar(const Verdict& verdict, const std::string& stopped_because);

// What would resolve an interval that includes 1: the number of alternated pairs whose 95% interval
// (Student t on the log pair speedups, as judge() computes it) would exclude 1 at these pairs'
// spread if their mean held: the smallest n with t_{0.975, n-1} x sd / sqrt(n) < mean. nullopt when
// the mean pair speedup is not above 1 (no number of pairs shows a gain), the spread is 0, or n would
// exceed `max_pairs` (--repeats' limit).
std::optional<int> pairs_to_resolve(const std::vector<double>& pair_speedups, int max_pairs = 1000);

// The verdict on `candidate` from the pairs that completed; `stopped_because` says why the pairs
// ended early (a failed run, pair_rejection's reason), "" when every pair ran. A candidate that is
// DDP's defaults (the fastest configuration measured) is kept without pairs.
Verdict judge(const CommConfig& candidate, const std::vector<PairRun>& pairs, const std::string& stopped_because,
              const RuleOptions& options, const CandidateEvidence& evidence = {});

}  // namespace acspeed::tuner
