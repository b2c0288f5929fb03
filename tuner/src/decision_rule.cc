#include "decision_rule.h"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "acspeed/comm_methods.h"
#include "acspeed/tuner/statistics.h"

namespace acspeed::tuner {

void to_json(nlohmann::json& j, const PairRun& p) {
  j = {{"order", p.candidate_first ? "candidate-first" : "baseline-first"},
       {"candidate_step_times_s", p.candidate_steps_s},
       {"baseline_step_times_s", p.baseline_steps_s},
       {"speedup", pair_speedup(p.candidate_steps_s, p.baseline_steps_s)}};
  if (p.candidate_loss) j["candidate_loss"] = *p.candidate_loss;
  if (p.baseline_loss) j["baseline_loss"] = *p.baseline_loss;
}

void from_json(const nlohmann::json& j, PairRun& p) {
  p.candidate_first = j.at("order").get<std::string>() == "candidate-first";
  p.candidate_steps_s = j.at("candidate_step_times_s").get<std::vector<double>>();
  p.baseline_steps_s = j.at("baseline_step_times_s").get<std::vector<double>>();
  if (j.contains("candidate_loss")) p.candidate_loss = j["candidate_loss"].get<double>();
  if (j.contains("baseline_loss")) p.baseline_loss = j["baseline_loss"].get<double>();
}

std::string pair_rejection(const CommConfig& candidate, const PairRun& pair, const RuleOptions& options) {
  if (changes_numerics(candidate)) return "";
  if (!pair.candidate_loss || !pair.baseline_loss) return "";
  if (loss_within_tolerance(*pair.candidate_loss, *pair.baseline_loss, options.loss_tolerance,
                            pair.baseline_loss_first)) {
    return "";
  }
  return fmt::format("its loss after the trial was {:.6g} vs {:.6g} with DDP defaults, beyond --loss-tolerance {:g} "
                     "(an exact algorithm should match: a bug in the comm hook?)",
                     *pair.candidate_loss, *pair.baseline_loss, options.loss_tolerance);
}

std::optional<int> pairs_to_resolve(const std::vector<double>& pair_speedups, int max_pairs) {
  if (pair_speedups.size() < 2) return std::nullopt;
  std::vector<double> logs;
  for (double s : pair_speedups) logs.push_back(std::log(s));
  const double m = mean(logs), sd = stddev(logs);
  if (!(m > 0) || !(sd > 0)) return std::nullopt;
  for (int n = static_cast<int>(pair_speedups.size()) + 1; n <= max_pairs; ++n) {
    if (t_critical_95(n - 1) * sd / std::sqrt(static_cast<double>(n)) < m) return n;
  }
  return std::nullopt;
}

namespace {

// The next step for an interval that includes 1 (pairs_to_resolve), for the verdict's note. Inside a
// job nothing reruns the pairs, so the advice there is an acspeed-tune session with that many.
std::string resolve_hint(const std::vector<double>& pair_speedups, bool online) {
  if (const auto n = pairs_to_resolve(pair_speedups)) {
    const auto advice = online ? fmt::format("`acspeed-tune --repeats {}` can measure them", *n)
                               : fmt::format("run again with --repeats {} (longer trials, --steps, narrow the spread)", *n);
    return fmt::format("; at this spread about {} pairs would resolve it if the speedup holds: {}", *n, advice);
  }
  return fmt::format("; more pairs would not resolve it (its pairs' speedups {:.3f}): DDP defaults are as fast",
                     fmt::join(pair_speedups, ", "));
}

}  // namespace

bool undecided_by_pairs(const Verdict& v, const std::string& stopped_because) {
  const EffectiveSpeedup& s = v.speedups;
  if (v.accepted || !stopped_because.empty() || !s.step || !s.step_low || !s.inflation.finite_upper()) return false;
  return *s.step / s.inflation.high > s.bar && !(*s.step_low / s.inflation.high > s.bar);
}

bool kept_out_by_bar(const Verdict& v, const std::string& stopped_because) {
  const EffectiveSpeedup& s = v.speedups;
  if (v.accepted || !stopped_because.empty() || !s.step || !s.inflation.finite_upper() || !(s.bar > 1)) return false;
  return *s.step / s.inflation.high > 1;
}

Verdict judge(const CommConfig& candidate, const std::vector<PairRun>& pairs, const std::string& stopped_because,
              const RuleOptions& options, const CandidateEvidence& evidence) {
  Verdict v;
  v.speedups = effective_speedup(std::nullopt, std::nullopt, std::nullopt, evidence.inflation, evidence.bar);
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
    v.speedups = effective_speedup(s.speedup, s.ci_low, s.ci_high, evidence.inflation, evidence.bar);
    const Inflation& inflation = evidence.inflation;
    if (!rejection.empty()) {
      // The pairs ended early: that is the reason.
    } else if (inflation.kind != InflationKind::kMeasured) {
      rejection = fmt::format("its step inflation is {}", inflation.describe());
    } else if (!inflation.finite_upper()) {
      rejection = fmt::format("its step inflation {} has no upper bound: the compressed run did not reach the "
                              "uncompressed run's loss in some resamples",
                              inflation.describe());
    } else if (!inflation.by_definition && !(*v.speedups.effective_low > evidence.bar)) {
      rejection = fmt::format("its effective speedup's lower end {:.3f} (the step speedup's {:.3f} / the inflation's "
                              "upper end {:.3f}) does not exceed {:.3f}{} ({})",
                              *v.speedups.effective_low, s.ci_low, inflation.high, evidence.bar,
                              evidence.bar > 1 ? ", the best non-compressing config's step speedup" : "",
                              v.speedups.describe());
    } else if (!s.accepted) {
      rejection = s.ci_high < 1 ? fmt::format("it is significantly slower than DDP defaults: its speedup {:.3f}x has "
                                              "a 95% interval [{:.3f}, {:.3f}] wholly below 1",
                                              s.speedup, s.ci_low, s.ci_high)
                                : fmt::format("its speedup {:.3f}x has a 95% interval [{:.3f}, {:.3f}] that does not "
                                              "exclude 1{}",
                                              s.speedup, s.ci_low, s.ci_high, resolve_hint(s.speedups, options.online));
    }
  } else if (rejection.empty()) {
    rejection = "fewer than two pairs completed";
  }
  v.accepted = rejection.empty();
  if (!v.accepted) {
    v.note = fmt::format("keep DDP defaults: candidate {} rejected: {}", candidate.describe(), rejection);
  } else if (evidence.inflation.by_definition) {
    v.note = fmt::format("{}: {:.3f}x over DDP defaults, 95% interval [{:.3f}, {:.3f}] over {} pairs (inflation 1: "
                         "no compression, effective = step speedup)",
                         candidate.describe(), *v.speedup, *v.ci_low, *v.ci_high, pairs.size());
  } else {
    v.note = fmt::format("{}: {} over DDP defaults over {} pairs (effective = step speedup / inflation; its lower end "
                         "exceeds {:.3f})",
                         candidate.describe(), v.speedups.describe(), pairs.size(), evidence.bar);
  }
  return v;
}

}  // namespace acspeed::tuner
