// One tuning session, end to end: launch the trial workers once, search the space with the chosen
// strategy (every trial written to the store as it finishes), confirm the best candidate against
// DDP's defaults in alternated pairs, and store the decision (the candidate, or "keep DDP
// defaults") with its evidence. Node 0 coordinates and is the only store writer; other nodes only
// supervise their local workers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "search_space.h"

namespace acspeed::tuner {

struct TuneOptions {
  std::string model;                 // torchvision name or pkg.module:function
  std::string precision = "fp32";    // amp|fp32|fp16|bf16
  int nproc_per_node = 2;            // ranks on this node
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;               // 0: a free local port (single node); multi-node: required
  int batch_size = 32;               // per device
  int image_size = 224;              // torchvision models' input size
  int warmup = 5;                    // untimed steps per trial
  int steps = 20;                    // timed steps per trial
  int repeats = 5;                   // (candidate, baseline) pairs in the decision, >= 3
  double budget_minutes = 0;         // bound on the whole session; 0 = none
  SearchSpace space;
  bool compression_searched = false; // --compression was given
  std::string strategy = "auto";
  uint64_t seed = 0;
  int trial_timeout_s = 300;
  double loss_tolerance = 0.05;      // compression: |loss - baseline loss| <= tol x |baseline loss|
  std::optional<int64_t> resume;     // session to continue
  bool dry_run = false;
  bool gpu = false;                  // a GPU was found: NCCL knobs and GPU defaults
  std::vector<std::string> notes;    // defaults shrunk for a CPU-only machine etc., printed first
  std::vector<std::string> args;     // the tune arguments as given (stored; --resume re-reads them)
};

// Prints the plan (what --dry-run shows and a real run announces).
void print_plan(const TuneOptions& options, const std::string& strategy_name, const std::string& instance_type);

// Runs the session; returns the process exit code.
int run_tune(const TuneOptions& options, const cli::GlobalOptions& global);

}  // namespace acspeed::tuner
