// A tuning session written through the Store API, as the tuner writes one: a grid of search trials
// with synthetic but realistic step times (seeded), a DDP-defaults trial, a failed trial, three
// alternated candidate/baseline repeats and the decision with its evidence. Used by the GoogleTest
// suite and, through make_report_fixture, by the pytest suite.
#pragma once

#include <cstdint>
#include <string>

#include "acspeed/store.h"
#include "acspeed/tuner/online.h"

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

// An online session as a training job stores one: the online tuner (tuner/include/acspeed/tuner/online.h)
// driven with synthetic window times (2 streams take 0.7 of the job's own DDP's step, seeded +-1%
// noise) until it settles, then tuner::store_online. By default its key is the sample session's, so
// with that session's decision active it is stored inactive.
struct SampleOnlineOptions {
  std::string model_name = "pkg.net.Net";
  std::string instance_type = SampleSessionOptions{}.instance_type;
  int warmup_steps = 10;
  uint64_t seed = 3;
};
tuner::StoredOnline add_sample_online_session(Store& store, const SampleOnlineOptions& options = {});

}  // namespace acspeed::testing
