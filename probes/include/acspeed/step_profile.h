// The step-profile model every probe backend produces: how long one training step took, how much of
// it was compute and communication, and how much communication the step had to wait for.
//
// Definitions (per step, all times in nanoseconds, inside the step's window):
//   wall      = the window's length (step_begin to step_end).
//   compute   = time covered by at least one compute span.
//   comm      = time covered by at least one communication span.
//   exposed   = communication time not covered by compute: time the step waited on communication
//               that did not overlap compute (comm minus comm-and-compute).
//   overlap   = (comm - exposed) / comm, the share of communication hidden behind compute; 0 when
//               the step had no communication.
//   bucket i  = time covered by communication spans tagged with bucket i, and the bucket's bytes.
// Cross-rank rule (combine_ranks): step k of the job is step k of every rank; its wall, compute,
// comm and exposed times are each the MAXIMUM over ranks, its overlap ratio the MINIMUM over ranks,
// and each bucket's time and bytes the maximum over ranks. A row of the combined profile is therefore
// the slowest rank's view per metric, not one rank's step.
#pragma once

#include <cstdint>
#include <vector>

#include "acspeed/interval.h"

namespace acspeed {

// A communication span; bucket is the DDP bucket index it belongs to, or -1 when unknown.
struct CommSpan {
  Interval span;
  int bucket = -1;
};

// A bucket handed to communication in this step and its payload.
struct BucketLaunch {
  int index = 0;
  int64_t bytes = 0;
};

// What a backend saw in one step, before any arithmetic.
struct StepTimeline {
  Interval window;
  std::vector<Interval> compute;
  std::vector<CommSpan> comm;
  std::vector<BucketLaunch> buckets;
};

struct BucketProfile {
  int index = 0;
  int64_t bytes = 0;
  int64_t comm_ns = 0;
};

struct StepProfile {
  int64_t wall_ns = 0;
  int64_t compute_ns = 0;
  int64_t comm_ns = 0;
  int64_t exposed_comm_ns = 0;
  double overlap_ratio = 0.0;
  std::vector<BucketProfile> buckets;  // sorted by index; one entry per launched bucket index
};

// Applies the definitions above. Spans outside the window are clipped to it.
StepProfile profile_step(const StepTimeline& timeline);

// per_rank[r][k] = rank r's step k. Every rank must have the same number of steps (InvalidArgument
// naming the counts otherwise). An empty input gives an empty result.
std::vector<StepProfile> combine_ranks(const std::vector<std::vector<StepProfile>>& per_rank);

}  // namespace acspeed
