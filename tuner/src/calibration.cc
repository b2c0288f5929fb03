#include "calibration.h"

#include <algorithm>

#include <fmt/format.h>

namespace acspeed::tuner {

ModelSetup model_setup(const WorkerHello& hello) {
  return {hello.world_size, hello.nnodes, groups_per_role(hello.backend, hello.device)};
}

CalibrationPlan calibration_plan(const WorkerHello& hello, const std::vector<ModelTrial>& have) {
  CalibrationPlan plan;
  if (hello.nnodes < 2) {
    plan.skipped = "step model: one node, no inter-node link to model: no bound or prediction";
    return plan;
  }
  if (hello.probe.empty()) {
    plan.skipped = "step model: the workers have no probe: no bound or prediction";
    return plan;
  }
  auto missing = [&](TrialRole role) {
    return std::none_of(have.begin(), have.end(), [&](const ModelTrial& t) { return t.role == role; });
  };
  if (missing(TrialRole::kCompute)) {
    plan.trials.push_back({TrialRole::kCompute, TrialMode::kComputeOnly, "compute only (communication off)"});
  }
  if (missing(TrialRole::kCalibration)) {
    plan.trials.push_back({TrialRole::kCalibration, TrialMode::kHooked, "DDP defaults through acspeed's hook"});
  }
  return plan;
}

std::string calibration_note(const StepModel& model) {
  const Prediction p = predict(model, CommConfig{});
  if (!p.ok) return fmt::format("step model: not calibrated ({})", p.why_not);
  const LinkFit& fit = *link_fit_for(model, CommConfig{});  // predict() found it
  return fmt::format("step model: compute {} (forward + optimizer {}), link {:.1f} MB/s over {} flow(s) (configs "
                     "with other flow counts are measured before any forecast of them), latency {} per "
                     "collective{}, gradients {:.1f} MB per step",
                     format_seconds(*model.compute_s), format_seconds(model.serial_s.value_or(0)),
                     fit.bytes_per_s / 1e6, p.flows, format_seconds(fit.latency_s),
                     fit.latency_fitted ? "" : " (not separable yet)",
                     static_cast<double>(*model.payload_bytes) / 1e6);
}

}  // namespace acspeed::tuner
