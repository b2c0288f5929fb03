// What one trial measured: the schema of TrialRecord::metrics_json (the raw per-step times are in
// TrialRecord::step_times_s, seconds, max over ranks per step). Written by the tuner, read by
// `acspeed-tune report`. Every key is optional for a reader: a failed or timed-out trial may carry
// none, and the probe breakdown is absent where no probe ran.
//
// metrics_json (schema kTrialMetricsVersion):
//   "version"          int     kTrialMetricsVersion
//   "p50_s" "p75_s" "p90_s" "p95_s"
//                      float   percentiles of the step time (s, max over ranks per step)
//   "mean_s" "min_s" "max_s"   float   over the timed steps (s)
//   "samples_per_s"    float   per-device throughput at p50 = per-device batch / p50_s
//   "batch_size"       int     per-device batch
//   "warmup_steps" "steps"     int     untimed warm-up steps, timed steps
//   "compute_s"        float   probe: median per-step compute time (s), rank 0
//   "comm_s"           float   probe: median per-step communication time (s), rank 0
//   "exposed_comm_s"   float   probe: median per-step communication not hidden behind compute (s)
//   "probe"            string  which probe produced the breakdown ("cpu" or "cupti", acspeed.probes' backends)
//   "bucket_count"     int     probe, acspeed's hook: gradient buckets communicated per step
//   "bucket_bytes"     int     probe, acspeed's hook: their payload per step before compression (bytes)
//   "forward_s" "optimizer_s"  float   compute-only trials: median forward / optimizer time (s)
//   "gradients"        object  compute-only trials: the gradients' shapes from the workers' hello
//                              (gradient_layout.h), what the step model counts PowerSGD's bytes from
//   "loss_first"       float   loss of the first warm-up step (same weights and batch every trial)
//   "loss"             float   loss of the last timed step (mean over ranks)
//   "losses"           [float] the loss of every step, warm-up included (mean over ranks): the trajectory
//                              the convergence guard compares with an uncompressed run's
//   "compression_s"    float   PowerSGD's own compute per timed step (median; max over ranks; s)
//   "cpu_floor_s"      float   busy CPU time of a rank's cores per timed step over their count (probes'
//                              cpu_busy.h; the whole timed window / steps; max over ranks; s): the step
//                              model's CPU floor (CPU trials only; absent where /proc/stat cannot be read)
//   "fidelity_cosine"  float   compressed configs: cosine of the compressed vs exact averaged gradient,
//                              summed over the check steps (tuner/include/acspeed/tuner/convergence_guard.h)
//   "fidelity_norm_error" float  relative error of that sum's norm
//   "fidelity_step_cosine_min" float  the lowest single-step cosine of the window
//   "fidelity_steps"   int     check steps in the window
//   "fidelity_s"       float   seconds the trial spent on its own window (rank 0's wall clock)
//   "fidelity_trial"   int     the ordinal of the session's trial whose window these figures are (absent: this
//                              trial's own; the tuner measures the window once per numerics, see tuner/src/guard.h)
//   "trajectory"       [float] compressed configs and the guard's uncompressed reference: the loss of every step
//                              (mean over ranks) of a trajectory of T steps on T distinct batches per rank from
//                              the initial weights, compressing from its first step (convergence_guard.h)
//   "trajectory_s"     float   seconds the trial spent on its own trajectory (rank 0's wall clock): with
//                              "fidelity_s", what the convergence guard adds to a session (tuner/src/guard.h says it)
//   "trajectory_finite" bool   false: a loss of the trajectory became NaN/Inf (then no "trajectory")
//   "trajectory_trial" int     the ordinal of the trial whose trajectory this is (absent: this trial's own;
//                              measured once per numerics, as the fidelity window)
//   "inflation"        object  compressed configs: the step inflation against the uncompressed trajectory
//                              (inflation.h: kind, estimate, low, high, ...); absent: not judged
//   "guard"            object  the convergence guard's verdict and evidence (passed, reason, fidelity, loss)
//   "finite"           bool    no NaN/Inf in any loss of the trial (absent: not known)
//   "rebuild_s"        float   seconds to (re)wrap the model in DDP with this config
//   "pair"             int     decision phase only: index of the (candidate, baseline) pair
//   "candidate_index"  int     search phase only: index of the config in the session's search space
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "acspeed/tuner/gradient_layout.h"
#include "acspeed/tuner/inflation.h"

namespace acspeed::tuner {

inline constexpr int kTrialMetricsVersion = 1;

namespace metric {
inline constexpr const char* kVersion = "version";
inline constexpr const char* kP50 = "p50_s";
inline constexpr const char* kP75 = "p75_s";
inline constexpr const char* kP90 = "p90_s";
inline constexpr const char* kP95 = "p95_s";
inline constexpr const char* kMean = "mean_s";
inline constexpr const char* kMin = "min_s";
inline constexpr const char* kMax = "max_s";
inline constexpr const char* kSamplesPerS = "samples_per_s";
inline constexpr const char* kBatchSize = "batch_size";
inline constexpr const char* kWarmupSteps = "warmup_steps";
inline constexpr const char* kSteps = "steps";
inline constexpr const char* kComputeS = "compute_s";
inline constexpr const char* kCommS = "comm_s";
inline constexpr const char* kExposedCommS = "exposed_comm_s";
inline constexpr const char* kProbe = "probe";
inline constexpr const char* kBucketCount = "bucket_count";
inline constexpr const char* kBucketBytes = "bucket_bytes";
inline constexpr const char* kForwardS = "forward_s";
inline constexpr const char* kOptimizerS = "optimizer_s";
inline constexpr const char* kGradients = "gradients";
inline constexpr const char* kLossFirst = "loss_first";
inline constexpr const char* kLoss = "loss";
inline constexpr const char* kLosses = "losses";
inline constexpr const char* kCompressionS = "compression_s";
inline constexpr const char* kCpuFloorS = "cpu_floor_s";
inline constexpr const char* kFidelityCosine = "fidelity_cosine";
inline constexpr const char* kFidelityNormError = "fidelity_norm_error";
inline constexpr const char* kFidelityStepCosineMin = "fidelity_step_cosine_min";
inline constexpr const char* kFidelitySteps = "fidelity_steps";
inline constexpr const char* kFidelityS = "fidelity_s";
inline constexpr const char* kFidelityTrial = "fidelity_trial";
inline constexpr const char* kTrajectory = "trajectory";
inline constexpr const char* kTrajectoryS = "trajectory_s";
inline constexpr const char* kTrajectoryFinite = "trajectory_finite";
inline constexpr const char* kTrajectoryTrial = "trajectory_trial";
inline constexpr const char* kInflation = "inflation";
inline constexpr const char* kGuard = "guard";
inline constexpr const char* kFinite = "finite";
inline constexpr const char* kRebuildS = "rebuild_s";
inline constexpr const char* kPair = "pair";
inline constexpr const char* kCandidateIndex = "candidate_index";
}  // namespace metric

// The metrics in typed form.
struct TrialMetrics {
  double p50_s = 0, p75_s = 0, p90_s = 0, p95_s = 0, mean_s = 0, min_s = 0, max_s = 0;
  double samples_per_s = 0;
  int batch_size = 0;
  int warmup_steps = 0;
  int steps = 0;
  std::optional<double> compute_s, comm_s, exposed_comm_s;
  std::string probe;  // empty = no probe breakdown
  std::optional<int> bucket_count;
  std::optional<int64_t> bucket_bytes;
  std::optional<double> forward_s, optimizer_s;
  std::optional<GradientLayout> gradients;
  std::optional<double> loss_first, loss;
  std::vector<double> losses;
  std::optional<double> compression_s;
  std::optional<double> cpu_floor_s;
  std::optional<double> fidelity_cosine, fidelity_norm_error, fidelity_step_cosine_min;
  std::optional<int> fidelity_steps;
  std::optional<double> fidelity_s;
  std::optional<int64_t> fidelity_trial;
  std::vector<double> trajectory;
  std::optional<double> trajectory_s;
  std::optional<bool> trajectory_finite;
  std::optional<int64_t> trajectory_trial;
  std::optional<Inflation> inflation;
  nlohmann::json guard;  // null: the config was not judged (it changes no numerics, or it failed first)
  std::optional<bool> finite;  // nullopt: not recorded (never taken for finite)
  std::optional<double> rebuild_s;
  std::optional<int> pair;
  std::optional<int> candidate_index;
};

// A step time for people: "54.2 ms", "1.234 s".
std::string format_seconds(double seconds);

// Fills the step-time statistics from raw step times (seconds) and the per-device batch.
TrialMetrics metrics_from_steps(const std::vector<double>& step_times_s, int batch_size, int warmup_steps);
// The schema above, for nlohmann::json (ADL). from_json: missing keys keep their defaults; text
// that is not a JSON object, or a key of the wrong type, throws InvalidArgument naming it.
void to_json(nlohmann::json& j, const TrialMetrics& metrics);
void from_json(const nlohmann::json& j, TrialMetrics& metrics);
// The same as the text of TrialRecord::metrics_json.
std::string metrics_to_json(const TrialMetrics& metrics);
TrialMetrics metrics_from_json(const std::string& text);

}  // namespace acspeed::tuner
