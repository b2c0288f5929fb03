// The note a session ends its search with when compression was not searched but communication
// dominates the step (DESIGN: compression changes numerics, so it is searched only when asked;
// when communication dominates, the tuner says so): the share of DDP's default step spent on
// communication, and what each compression would send instead (gradient_layout.h).
#pragma once

#include <optional>
#include <string>

#include "acspeed/tuner/gradient_layout.h"
#include "acspeed/tuner/trial_metrics.h"

namespace acspeed::tuner {

// The note for the default config's `metrics` (exposed communication, else communication, from the
// probe), or nothing when communication is under 40% of its step or was not measured. `gradients`
// (may be empty) gives the sizes each compression would send.
std::optional<std::string> compression_hint(const TrialMetrics& metrics, const GradientLayout& gradients);

}  // namespace acspeed::tuner
