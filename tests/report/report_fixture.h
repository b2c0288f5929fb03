// A tuning session written through the Store API, as the tuner writes one: a grid of search trials
// with synthetic but realistic step times (seeded), a DDP-defaults trial, a failed trial, three
// alternated candidate/baseline repeats and the decision with its evidence. Used by the GoogleTest
// suite and, through make_report_fixture, by the pytest suite.
#pragma once

#include <cstdint>
#include <string>

#include "acspeed/store.h"

namespace acspeed::testing {

struct SampleSessionOptions {
  std::string model_name = "resnet18";
  std::string instance_type = "ecs.g7.2xlarge/8c-xeon";
  std::string error_text = "worker 1 exited: signal 9 (\"killed\"), see log, line 2\nsecond line";
  bool with_decision = true;      // candidate/baseline repeats + decision
  bool with_metrics = true;       // compute_s / comm_s / exposed_comm_s / loss on search trials
  uint32_t seed = 7;
};

// Returns the new session's id.
int64_t add_sample_session(Store& store, const SampleSessionOptions& options = {});

}  // namespace acspeed::testing
