#include "acspeed/tuner/trial_metrics.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "acspeed/error.h"
#include "acspeed/json_io.h"
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

void to_json(json& j, const TrialMetrics& m) {
  j = {{metric::kVersion, kTrialMetricsVersion},
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
       {metric::kSteps, m.steps}};
  auto put = [&j](const char* key, const auto& value) {
    if (value) j[key] = *value;
  };
  put(metric::kComputeS, m.compute_s);
  put(metric::kCommS, m.comm_s);
  put(metric::kExposedCommS, m.exposed_comm_s);
  if (!m.probe.empty()) j[metric::kProbe] = m.probe;
  put(metric::kBucketCount, m.bucket_count);
  put(metric::kBucketBytes, m.bucket_bytes);
  put(metric::kForwardS, m.forward_s);
  put(metric::kOptimizerS, m.optimizer_s);
  put(metric::kGradients, m.gradients);
  put(metric::kLossFirst, m.loss_first);
  put(metric::kLoss, m.loss);
  if (!m.losses.empty()) j[metric::kLosses] = m.losses;
  put(metric::kCompressionS, m.compression_s);
  put(metric::kCpuFloorS, m.cpu_floor_s);
  put(metric::kFidelityCosine, m.fidelity_cosine);
  put(metric::kFidelityNormError, m.fidelity_norm_error);
  put(metric::kFidelityStepCosineMin, m.fidelity_step_cosine_min);
  put(metric::kFidelitySteps, m.fidelity_steps);
  put(metric::kFidelityS, m.fidelity_s);
  put(metric::kFidelityTrial, m.fidelity_trial);
  if (!m.trajectory.empty()) j[metric::kTrajectory] = m.trajectory;
  put(metric::kTrajectoryS, m.trajectory_s);
  put(metric::kTrajectoryFinite, m.trajectory_finite);
  put(metric::kTrajectoryTrial, m.trajectory_trial);
  put(metric::kInflation, m.inflation);
  if (!m.guard.is_null()) j[metric::kGuard] = m.guard;
  put(metric::kFinite, m.finite);
  put(metric::kRebuildS, m.rebuild_s);
  put(metric::kPair, m.pair);
  put(metric::kCandidateIndex, m.candidate_index);
}

void from_json(const json& j, TrialMetrics& m) {
  using json_io::read;
  json_io::require_object(j, "trial metrics");
  m = TrialMetrics{};
  read(j, metric::kP50, m.p50_s);
  read(j, metric::kP75, m.p75_s);
  read(j, metric::kP90, m.p90_s);
  read(j, metric::kP95, m.p95_s);
  read(j, metric::kMean, m.mean_s);
  read(j, metric::kMin, m.min_s);
  read(j, metric::kMax, m.max_s);
  read(j, metric::kSamplesPerS, m.samples_per_s);
  read(j, metric::kBatchSize, m.batch_size);
  read(j, metric::kWarmupSteps, m.warmup_steps);
  read(j, metric::kSteps, m.steps);
  read(j, metric::kComputeS, m.compute_s);
  read(j, metric::kCommS, m.comm_s);
  read(j, metric::kExposedCommS, m.exposed_comm_s);
  read(j, metric::kProbe, m.probe);
  read(j, metric::kBucketCount, m.bucket_count);
  read(j, metric::kBucketBytes, m.bucket_bytes);
  read(j, metric::kForwardS, m.forward_s);
  read(j, metric::kOptimizerS, m.optimizer_s);
  read(j, metric::kGradients, m.gradients);
  read(j, metric::kLossFirst, m.loss_first);
  read(j, metric::kLoss, m.loss);
  read(j, metric::kLosses, m.losses);
  read(j, metric::kCompressionS, m.compression_s);
  read(j, metric::kCpuFloorS, m.cpu_floor_s);
  read(j, metric::kFidelityCosine, m.fidelity_cosine);
  read(j, metric::kFidelityNormError, m.fidelity_norm_error);
  read(j, metric::kFidelityStepCosineMin, m.fidelity_step_cosine_min);
  read(j, metric::kFidelitySteps, m.fidelity_steps);
  read(j, metric::kFidelityS, m.fidelity_s);
  read(j, metric::kFidelityTrial, m.fidelity_trial);
  read(j, metric::kTrajectory, m.trajectory);
  read(j, metric::kTrajectoryS, m.trajectory_s);
  read(j, metric::kTrajectoryFinite, m.trajectory_finite);
  read(j, metric::kTrajectoryTrial, m.trajectory_trial);
  if (j.contains(metric::kInflation) && !j.at(metric::kInflation).is_null()) {
    m.inflation = j.at(metric::kInflation).get<Inflation>();
  }
  if (j.contains(metric::kGuard)) {
    if (!j.at(metric::kGuard).is_object() && !j.at(metric::kGuard).is_null()) {
      json_io::wrong_type(metric::kGuard, "an object", j.at(metric::kGuard));
    }
    m.guard = j.at(metric::kGuard);
  }
  read(j, metric::kFinite, m.finite);
  read(j, metric::kRebuildS, m.rebuild_s);
  read(j, metric::kPair, m.pair);
  read(j, metric::kCandidateIndex, m.candidate_index);
}

std::string metrics_to_json(const TrialMetrics& metrics) { return json(metrics).dump(); }

TrialMetrics metrics_from_json(const std::string& text) {
  return json_io::parse(text, "trial metrics").get<TrialMetrics>();
}

}  // namespace acspeed::tuner
