#include "acspeed/tuner/convergence_guard.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace acspeed::tuner {
namespace {

bool all_finite(const std::vector<double>& values, size_t n) {
  return std::all_of(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(n),
                     [](double v) { return std::isfinite(v); });
}

double tail_mean(const std::vector<double>& values, size_t n, size_t tail) {
  double sum = 0;
  for (size_t i = n - tail; i < n; ++i) sum += values[i];
  return sum / static_cast<double>(tail);
}

}  // namespace

LossCheck check_loss_trajectory(const std::vector<double>& candidate, const std::vector<double>& reference,
                                const GuardThresholds& t) {
  LossCheck c;
  const size_t n = std::min(candidate.size(), reference.size());
  c.steps_compared = static_cast<int>(n);
  if (n == 0 || !all_finite(candidate, n) || !all_finite(reference, n)) return c;
  const size_t tail = std::max<size_t>(1, static_cast<size_t>(std::lround(t.tail_fraction * static_cast<double>(n))));
  c.candidate_tail = tail_mean(candidate, n, tail);
  c.reference_tail = tail_mean(reference, n, tail);
  c.reference_first = reference.front();
  c.excess = c.candidate_tail - c.reference_tail;
  c.allowed = std::max(t.loss_relative * std::abs(c.reference_tail),
                       t.loss_progress * std::max(0.0, c.reference_first - c.reference_tail));
  c.passed = c.excess <= c.allowed;
  if (tail > 2) {
    // The per-step differences over the tail (their mean is the excess) around their least-squares
    // line: a difference still shrinking or growing through the tail is a trend, not noise.
    const double middle = static_cast<double>(tail - 1) / 2;
    std::vector<double> centred(tail);  // each step's difference minus their mean
    double slope_num = 0, slope_den = 0;
    for (size_t k = 0; k < tail; ++k) {
      const double x = static_cast<double>(k) - middle;
      centred[k] = candidate[n - tail + k] - reference[n - tail + k] - c.excess;
      slope_num += x * centred[k];
      slope_den += x * x;
    }
    const double slope = slope_num / slope_den;
    double squares = 0;
    for (size_t k = 0; k < tail; ++k) squares += std::pow(centred[k] - slope * (static_cast<double>(k) - middle), 2);
    c.noise = std::sqrt(squares / static_cast<double>(tail - 2) / static_cast<double>(tail));
  }
  c.within_noise = !c.passed && c.excess - c.allowed <= t.undecided_z * c.noise;
  return c;
}

std::string describe(const LossCheck& c) {
  return fmt::format("trajectory loss over the last steps {:.4g} vs {:.4g} uncompressed: {:.4g} above it, "
                     "allowed {:.4g}",
                     c.candidate_tail, c.reference_tail, c.excess, c.allowed);
}

nlohmann::json loss_evidence(const LossCheck& c, const GuardThresholds& t) {
  return {{"passed", c.passed},
          {"steps_compared", c.steps_compared},
          {"candidate_tail", c.candidate_tail},
          {"reference_tail", c.reference_tail},
          {"reference_first", c.reference_first},
          {"excess", c.excess},
          {"allowed", c.allowed},
          {"noise", c.noise},
          {"within_noise", c.within_noise},
          {"undecided_z", t.undecided_z},
          {"loss_relative", t.loss_relative},
          {"loss_progress", t.loss_progress},
          {"tail_fraction", t.tail_fraction}};
}

GuardVerdict judge_convergence(const TrialMetrics& candidate, const TrialMetrics& reference,
                               const GuardThresholds& t) {
  GuardVerdict v;
  std::vector<std::string> failures;
  nlohmann::json fidelity = {{"min_cosine", t.min_cosine}, {"max_norm_error", t.max_norm_error}};
  if (candidate.fidelity_cosine && candidate.fidelity_norm_error) {
    const double cosine = *candidate.fidelity_cosine;
    const double norm_error = *candidate.fidelity_norm_error;
    fidelity["cosine"] = cosine;
    fidelity["norm_error"] = norm_error;
    if (candidate.fidelity_step_cosine_min) fidelity["step_cosine_min"] = *candidate.fidelity_step_cosine_min;
    if (candidate.fidelity_steps) fidelity["steps"] = *candidate.fidelity_steps;
    if (candidate.fidelity_trial) fidelity["from_trial"] = *candidate.fidelity_trial;
    const bool ok = std::isfinite(cosine) && std::isfinite(norm_error) && cosine >= t.min_cosine &&
                    norm_error <= t.max_norm_error;
    fidelity["passed"] = ok;
    if (!ok) {
      failures.push_back(fmt::format("gradient fidelity over {} check steps{}: cosine {:.4f} (needs >= {:g}), norm "
                                     "error {:.4f} (needs <= {:g})",
                                     candidate.fidelity_steps.value_or(0),
                                     candidate.fidelity_trial
                                         ? fmt::format(" (measured in trial {})", *candidate.fidelity_trial)
                                         : std::string(),
                                     cosine, t.min_cosine, norm_error, t.max_norm_error));
    }
  } else {
    fidelity["passed"] = false;
    failures.emplace_back("no gradient-fidelity figures were measured");
  }
  const LossCheck loss = check_loss_trajectory(candidate.trajectory, reference.trajectory, t);
  v.evidence = {{"fidelity", fidelity}, {"loss", loss_evidence(loss, t)}};
  if (!loss.passed) {
    failures.push_back(loss.steps_compared == 0
                           ? std::string(candidate.trajectory_finite == false
                                             ? "a loss of its trajectory became NaN/Inf"
                                             : "no loss trajectory to compare with the uncompressed one")
                           : describe(loss));
  }
  v.passed = failures.empty();
  v.loss_only = failures.size() == 1 && !loss.passed && loss.steps_compared > 0;
  v.loss_undecided = v.loss_only && loss.within_noise;
  for (const auto& f : failures) v.reason += (v.reason.empty() ? "" : "; ") + f;
  v.evidence["passed"] = v.passed;
  if (!v.passed) v.evidence["reason"] = v.reason;
  return v;
}

}  // namespace acspeed::tuner
