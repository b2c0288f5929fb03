// The step model's own trials (step_model.h): the compute-only step, and DDP's defaults through
// acspeed's hook for their per-bucket times. Only where there is an inter-node link to model and a
// probe to time the buckets; a resumed session reuses the ones it stored.
#pragma once

#include <string>
#include <vector>

#include "acspeed/tuner/step_model.h"
#include "protocol.h"

namespace acspeed::tuner {

struct CalibrationTrial {
  TrialRole role;  // compute or calibration
  TrialMode mode;
  const char* label;
};

struct CalibrationPlan {
  std::string skipped;                   // why the session runs none and has no model ("" when it does)
  std::vector<CalibrationTrial> trials;  // those of `have` lacks, each with DDP's defaults
};

// The step model's view of the workers: their world, nodes and how their hook groups phases (flows.h).
ModelSetup model_setup(const WorkerHello& hello);

// What the session still has to run for its step model, given the workers and the model trials it has.
CalibrationPlan calibration_plan(const WorkerHello& hello, const std::vector<ModelTrial>& have);

// After those trials: the model's fit (compute, link, latency, gradient bytes), or why it is not calibrated.
std::string calibration_note(const StepModel& model);

}  // namespace acspeed::tuner
