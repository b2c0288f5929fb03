// What a tuning session runs with when the user does not say: one row for a machine with a GPU,
// one for a CPU-only machine, where every trial is slow and noisy, so the steps, the search space
// and the pairs shrink and the session gets a time budget.
#pragma once

#include <vector>

namespace acspeed::tuner {

struct TuneDefaults {
  int nproc_per_node;     // ranks per node; 0 = one per GPU
  int batch_size;         // per device
  int image_size;         // torchvision models' input size
  int warmup;             // untimed steps per trial
  int steps;              // timed steps per trial
  int repeats;            // (candidate, DDP defaults) pairs in the decision
  double budget_minutes;  // TuneOptions::budget_minutes; 0 = none
  std::vector<double> bucket_mb;  // bucket sizes searched, MiB
  std::vector<int> streams;       // stream counts searched
};

// The row for this machine: `gpu` = a GPU was found.
const TuneDefaults& tune_defaults(bool gpu);

}  // namespace acspeed::tuner
