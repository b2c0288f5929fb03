#include "acspeed/tuner/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "acspeed/error.h"

namespace acspeed::tuner {

double percentile(std::vector<double> values, double q) {
  if (values.empty()) ACS_THROW(InvalidArgument, "percentile of an empty sample");
  if (!(q >= 0 && q <= 100)) ACS_THROW(InvalidArgument, "percentile {} is not in [0, 100]", q);
  std::sort(values.begin(), values.end());
  const double rank = q / 100.0 * static_cast<double>(values.size() - 1);
  const auto below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, values.size() - 1);
  const double fraction = rank - static_cast<double>(below);
  return values[below] + (values[above] - values[below]) * fraction;
}

double median(const std::vector<double>& values) { return percentile(values, 50); }

double mean(const std::vector<double>& values) {
  if (values.empty()) ACS_THROW(InvalidArgument, "mean of an empty sample");
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double stddev(const std::vector<double>& values) {
  if (values.size() < 2) return 0;
  const double m = mean(values);
  double sum = 0;
  for (double v : values) sum += (v - m) * (v - m);
  return std::sqrt(sum / static_cast<double>(values.size() - 1));
}

double t_critical_95(int dof) {
  if (dof < 1) ACS_THROW(InvalidArgument, "t distribution needs at least 1 degree of freedom, got {}", dof);
  // t_{0.975, dof} for dof = 1..30.
  static const double table[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                 2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                 2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (dof <= 30) return table[dof - 1];
  // Beyond the table the value is close to linear in 1/dof between 30 (2.042) and infinity (1.960).
  return 1.960 + (2.042 - 1.960) * 30.0 / static_cast<double>(dof);
}

Interval t_interval_95(const std::vector<double>& values) {
  if (values.size() < 2) ACS_THROW(InvalidArgument, "a t interval needs at least 2 values, got {}", values.size());
  const double m = mean(values);
  const double half =
      t_critical_95(static_cast<int>(values.size()) - 1) * stddev(values) / std::sqrt(static_cast<double>(values.size()));
  return {m, m - half, m + half};
}

Interval bootstrap_interval_95(const std::vector<double>& values, uint64_t seed, int resamples) {
  if (values.size() < 2) {
    ACS_THROW(InvalidArgument, "a bootstrap interval needs at least 2 values, got {}", values.size());
  }
  if (resamples < 100) ACS_THROW(InvalidArgument, "bootstrap resamples {} must be at least 100", resamples);
  std::mt19937_64 generator(seed);
  const uint64_t n = values.size();
  std::vector<double> means;
  means.reserve(static_cast<size_t>(resamples));
  for (int r = 0; r < resamples; ++r) {
    double sum = 0;
    // Modulo keeps the draw identical across standard libraries (distributions are not).
    for (uint64_t i = 0; i < n; ++i) sum += values[generator() % n];
    means.push_back(sum / static_cast<double>(n));
  }
  return {mean(values), percentile(means, 2.5), percentile(means, 97.5)};
}

double pair_speedup(const std::vector<double>& candidate_steps_s, const std::vector<double>& baseline_steps_s) {
  return median(baseline_steps_s) / median(candidate_steps_s);
}

PairedSpeedup paired_speedup(const std::vector<std::vector<double>>& candidate_steps,
                             const std::vector<std::vector<double>>& baseline_steps, IntervalMethod method,
                             uint64_t seed) {
  ACS_ENFORCE_EQ(candidate_steps.size(), baseline_steps.size(), "one baseline per candidate run");
  if (candidate_steps.size() < 2) {
    ACS_THROW(InvalidArgument, "a paired speedup needs at least 2 pairs, got {}", candidate_steps.size());
  }
  PairedSpeedup result;
  std::vector<double> logs;
  for (size_t i = 0; i < candidate_steps.size(); ++i) {
    const double ratio = pair_speedup(candidate_steps[i], baseline_steps[i]);
    if (!(ratio > 0 && std::isfinite(ratio))) {
      ACS_THROW(InvalidArgument, "pair {} has a non-positive or non-finite speedup {}", i, ratio);
    }
    result.speedups.push_back(ratio);
    logs.push_back(std::log(ratio));
  }
  const Interval interval =
      method == IntervalMethod::kStudentT ? t_interval_95(logs) : bootstrap_interval_95(logs, seed);
  result.speedup = std::exp(interval.estimate);
  result.ci_low = std::exp(interval.low);
  result.ci_high = std::exp(interval.high);
  result.accepted = result.ci_low > 1.0;
  return result;
}

bool loss_within_tolerance(double compressed_loss, double uncompressed_loss, double tolerance,
                           std::optional<double> initial_loss) {
  if (!std::isfinite(compressed_loss) || !std::isfinite(uncompressed_loss)) return false;
  double scale = std::max(std::abs(uncompressed_loss), std::numeric_limits<double>::min());
  if (initial_loss && std::isfinite(*initial_loss)) scale = std::max(scale, std::abs(*initial_loss - uncompressed_loss));
  return std::abs(compressed_loss - uncompressed_loss) <= tolerance * scale;
}

}  // namespace acspeed::tuner
