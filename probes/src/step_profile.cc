#include "acspeed/step_profile.h"

#include <algorithm>
#include <map>

#include "acspeed/error.h"

namespace acspeed {

StepProfile profile_step(const StepTimeline& timeline) {
  const Interval window = timeline.window;
  const IntervalSet compute = clip(unite(timeline.compute), window);
  std::vector<Interval> all_comm;
  std::map<int, std::vector<Interval>> by_bucket;
  for (const auto& c : timeline.comm) {
    all_comm.push_back(c.span);
    if (c.bucket >= 0) by_bucket[c.bucket].push_back(c.span);
  }
  const IntervalSet comm = clip(unite(std::move(all_comm)), window);

  StepProfile out;
  out.wall_ns = window.length();
  out.compute_ns = total_length(compute);
  out.comm_ns = total_length(comm);
  out.exposed_comm_ns = total_length(subtract(comm, compute));
  out.overlap_ratio =
      out.comm_ns > 0 ? double(out.comm_ns - out.exposed_comm_ns) / double(out.comm_ns) : 0.0;

  std::map<int, BucketProfile> buckets;
  for (const auto& launch : timeline.buckets) {
    if (launch.bytes < 0) {
      ACS_THROW(InvalidArgument, "bucket {} has a negative size ({} bytes)", launch.index,
                launch.bytes);
    }
    auto& b = buckets[launch.index];
    b.index = launch.index;
    b.bytes += launch.bytes;
  }
  for (auto& [index, spans] : by_bucket) {
    auto& b = buckets[index];
    b.index = index;
    b.comm_ns = total_length(clip(unite(std::move(spans)), window));
  }
  for (auto& [index, b] : buckets) out.buckets.push_back(b);
  return out;
}

std::vector<StepProfile> combine_ranks(const std::vector<std::vector<StepProfile>>& per_rank) {
  if (per_rank.empty()) return {};
  const size_t steps = per_rank.front().size();
  for (size_t r = 1; r < per_rank.size(); ++r) {
    if (per_rank[r].size() != steps) {
      ACS_THROW(InvalidArgument,
                "ranks recorded different step counts: rank 0 has {} steps, rank {} has {}; "
                "every rank must mark the same steps",
                steps, r, per_rank[r].size());
    }
  }
  std::vector<StepProfile> out(steps);
  for (size_t k = 0; k < steps; ++k) {
    StepProfile& c = out[k];
    c.overlap_ratio = 1.0;
    std::map<int, BucketProfile> buckets;
    for (const auto& rank : per_rank) {
      const StepProfile& s = rank[k];
      c.wall_ns = std::max(c.wall_ns, s.wall_ns);
      c.compute_ns = std::max(c.compute_ns, s.compute_ns);
      c.comm_ns = std::max(c.comm_ns, s.comm_ns);
      c.exposed_comm_ns = std::max(c.exposed_comm_ns, s.exposed_comm_ns);
      c.overlap_ratio = std::min(c.overlap_ratio, s.overlap_ratio);
      for (const auto& b : s.buckets) {
        auto& m = buckets[b.index];
        m.index = b.index;
        m.bytes = std::max(m.bytes, b.bytes);
        m.comm_ns = std::max(m.comm_ns, b.comm_ns);
      }
    }
    for (auto& [index, b] : buckets) c.buckets.push_back(b);
  }
  return out;
}

}  // namespace acspeed
