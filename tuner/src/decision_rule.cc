#include "decision_rule.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "acspeed/comm_methods.h"
#include "acspeed/tuner/statistics.h"
#include "convergence_guard.h"

namespace acspeed::tuner {

void to_json(nlohmann::json& j, const PairRun& p) {
  j = {{"order", p.candidate_first ? "candidate-first" : "baseline-first"},
       {"candidate_step_times_s", p.candidate_steps_s},
       {"baseline_step_times_s", p.baseline_steps_s},
       {"speedup", pair_speedup(p.candidate_steps_s, p.baseline_steps_s)}};
  if (p.candidate_loss) j["candidate_loss"] = *p.candidate_loss;
  if (p.baseline_loss) j["baseline_loss"] = *p.baseline_loss;
  if (!p.guard.is_null()) j["guard"] = p.guard;
}

std::string pair_rejection(const CommConfig& candidate, PairRun& pair, const RuleOptions& options) {
  if (changes_numerics(candidate)) {
    const GuardVerdict verdict = judge_convergence(pair.candidate_metrics, pair.baseline_metrics);
    pair.guard = verdict.evidence;
    return verdict.passed ? "" : "the convergence guard failed it: " + verdict.reason;
  }
  if (!pair.candidate_loss || !pair.baseline_loss) return "";
  if (loss_within_tolerance(*pair.candidate_loss, *pair.baseline_loss, options.loss_tolerance,
                            pair.baseline_loss_first)) {
    return "";
  }
  return fmt::format("its loss after the trial was {:.6g} vs {:.6g} with DDP defaults, beyond --loss-tolerance {:g} "
                     "(an exact algorithm should match: a bug in the comm hook?)",
                     *pair.candidate_loss, *pair.baseline_loss, options.loss_tolerance);
}

Verdict judge(const CommConfig& candidate, const std::vector<PairRun>& pairs, const std::string& stopped_because,
              const RuleOptions& options) {
  Verdict v;
  if (candidate.is_default()) {
    v.accepted = true;
    v.note = "DDP defaults were the fastest configuration measured: keep DDP defaults";
    return v;
  }
  std::string rejection = stopped_because;
  if (pairs.size() >= 2) {
    std::vector<std::vector<double>> candidate_steps, baseline_steps;
    for (const auto& p : pairs) {
      candidate_steps.push_back(p.candidate_steps_s);
      baseline_steps.push_back(p.baseline_steps_s);
    }
    const auto s = paired_speedup(candidate_steps, baseline_steps, IntervalMethod::kStudentT, options.seed);
    v.speedup = s.speedup;
    v.ci_low = s.ci_low;
    v.ci_high = s.ci_high;
    v.pair_speedups = s.speedups;
    if (rejection.empty() && !s.accepted) {
      rejection = fmt::format("its speedup {:.3f}x has a 95% interval [{:.3f}, {:.3f}] that does not exclude 1",
                              s.speedup, s.ci_low, s.ci_high);
    }
  } else if (rejection.empty()) {
    rejection = "fewer than two pairs completed";
  }
  v.accepted = rejection.empty();
  v.note = v.accepted ? fmt::format("{}: {:.3f}x over DDP defaults, 95% interval [{:.3f}, {:.3f}] over {} pairs",
                                    candidate.describe(), *v.speedup, *v.ci_low, *v.ci_high, pairs.size())
                      : fmt::format("keep DDP defaults: candidate {} rejected: {}", candidate.describe(), rejection);
  return v;
}

}  // namespace acspeed::tuner
