// Percentile breakdown of step profiles: what the tuner logs and the benchmark's --profile prints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "acspeed/step_profile.h"

namespace acspeed {

// The q-th percentile (0 <= q <= 100) of values, interpolating linearly between the two nearest
// ranks (numpy's default). Throws InvalidArgument for an empty input or q outside [0, 100].
double percentile(std::vector<double> values, double q);

struct SummaryOptions {
  // Percentiles reported, each in [0, 100]. Default: the benchmark line's p50, p75, p90, p95.
  std::vector<double> percentiles = {50, 75, 90, 95};
  // Ranks the steps were combined over (1 = this rank only); shown in the table's heading.
  int ranks = 1;
  // Backend that measured the steps ("cupti", "cpu"); shown in the table's heading.
  std::string backend;
};

// One row per requested percentile. Each column is that percentile of its own metric over the steps,
// so a row does not describe one single step.
struct SummaryRow {
  double percentile = 0;
  double wall_s = 0;
  double compute_s = 0;
  double comm_s = 0;
  double exposed_comm_s = 0;
  double overlap_ratio = 0;
};

struct BucketSummary {
  int index = 0;
  int64_t bytes = 0;     // the largest payload seen for this bucket
  double comm_s_p50 = 0;  // median over the steps that launched it
  int64_t steps = 0;      // steps that launched it
};

struct ProfileSummary {
  int64_t steps = 0;
  int ranks = 1;
  std::string backend;
  std::vector<SummaryRow> rows;
  std::vector<BucketSummary> buckets;  // sorted by index
};

// Throws InvalidArgument when steps is empty.
ProfileSummary summarize(const std::vector<StepProfile>& steps, const SummaryOptions& options = {});

// A human table (units in the header), e.g.
//   probe: cpu, 2 ranks, 20 steps (per step: max over ranks; overlap: min over ranks)
//   pct  wall(ms)  compute(ms)  comm(ms)  exposed(ms)  exposed/wall  overlap
//   p50     ...
// followed by one line per bucket.
std::string format_summary(const ProfileSummary& summary);

}  // namespace acspeed
