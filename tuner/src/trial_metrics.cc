#include "acspeed/tuner/trial_metrics.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "acspeed/error.h"
#include "acspeed/tuner/statistics.h"

namespace acspeed::tuner {

using nlohmann::json;

std::string format_seconds(double s) {
  return s < 1 ? fmt::format("{:.1f} ms", s * 1e3) : fmt::format("{:.3f} s", s);
}

TrialMetrics metrics_from_steps(const std::vector<double>& step_times_s, int batch_size, int warmup_steps) {
  TrialMetrics m;
  m.batch_size = batch_size;
  m.warmup_steps = warmup_steps;
  m.steps = static_cast<int>(step_times_s.size());
  if (step_times_s.empty()) return m;
  m.p50_s = percentile(step_times_s, 50);
  m.p75_s = percentile(step_times_s, 75);
  m.p90_s = percentile(step_times_s, 90);
  m.p95_s = percentile(step_times_s, 95);
  m.mean_s = mean(step_times_s);
  m.min_s = percentile(step_times_s, 0);
  m.max_s = percentile(step_times_s, 100);
  m.samples_per_s = m.p50_s > 0 ? batch_size / m.p50_s : 0;
  return m;
}

std::string metrics_to_json(const TrialMetrics& m) {
  json j = {{metric::kVersion, kTrialMetricsVersion},
            {metric::kP50, m.p50_s},
            {metric::kP75, m.p75_s},
            {metric::kP90, m.p90_s},
            {metric::kP95, m.p95_s},
            {metric::kMean, m.mean_s},
            {metric::kMin, m.min_s},
            {metric::kMax, m.max_s},
            {metric::kSamplesPerS, m.samples_per_s},
            {metric::kBatchSize, m.batch_size},
            {metric::kWarmupSteps, m.warmup_steps},
            {metric::kSteps, m.steps},
            {metric::kFinite, m.finite}};
  auto put = [&j](const char* key, const auto& value) {
    if (value) j[key] = *value;
  };
  put(metric::kComputeS, m.compute_s);
  put(metric::kCommS, m.comm_s);
  put(metric::kExposedCommS, m.exposed_comm_s);
  if (!m.probe.empty()) j[metric::kProbe] = m.probe;
  put(metric::kLossFirst, m.loss_first);
  put(metric::kLoss, m.loss);
  put(metric::kRebuildS, m.rebuild_s);
  put(metric::kPair, m.pair);
  put(metric::kCandidateIndex, m.candidate_index);
  return j.dump();
}

TrialMetrics metrics_from_json(const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object()) ACS_THROW(InvalidArgument, "trial metrics are not a JSON object: {}", text);
  TrialMetrics m;
  auto number = [&j](const char* key, double& out) {
    if (j.contains(key) && j[key].is_number()) out = j[key].get<double>();
  };
  auto integer = [&j](const char* key, int& out) {
    if (j.contains(key) && j[key].is_number_integer()) out = j[key].get<int>();
  };
  auto optional_number = [&j](const char* key, std::optional<double>& out) {
    if (j.contains(key) && j[key].is_number()) out = j[key].get<double>();
  };
  auto optional_integer = [&j](const char* key, std::optional<int>& out) {
    if (j.contains(key) && j[key].is_number_integer()) out = j[key].get<int>();
  };
  number(metric::kP50, m.p50_s);
  number(metric::kP75, m.p75_s);
  number(metric::kP90, m.p90_s);
  number(metric::kP95, m.p95_s);
  number(metric::kMean, m.mean_s);
  number(metric::kMin, m.min_s);
  number(metric::kMax, m.max_s);
  number(metric::kSamplesPerS, m.samples_per_s);
  integer(metric::kBatchSize, m.batch_size);
  integer(metric::kWarmupSteps, m.warmup_steps);
  integer(metric::kSteps, m.steps);
  optional_number(metric::kComputeS, m.compute_s);
  optional_number(metric::kCommS, m.comm_s);
  optional_number(metric::kExposedCommS, m.exposed_comm_s);
  if (j.contains(metric::kProbe) && j[metric::kProbe].is_string()) m.probe = j[metric::kProbe].get<std::string>();
  optional_number(metric::kLossFirst, m.loss_first);
  optional_number(metric::kLoss, m.loss);
  if (j.contains(metric::kFinite) && j[metric::kFinite].is_boolean()) m.finite = j[metric::kFinite].get<bool>();
  optional_number(metric::kRebuildS, m.rebuild_s);
  optional_integer(metric::kPair, m.pair);
  optional_integer(metric::kCandidateIndex, m.candidate_index);
  return m;
}

}  // namespace acspeed::tuner
