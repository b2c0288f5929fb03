#include "acspeed/kernel_overlap.h"

#include <map>

#include "acspeed/kernel_class.h"

namespace acspeed {

KernelOverlap kernel_overlap(const std::vector<KernelRecord>& kernels) {
  KernelOverlap out;
  std::vector<Interval> compute;
  std::map<int64_t, std::vector<Interval>> comm_by_stream;
  for (const auto& k : kernels) {
    if (classify_kernel(k.name) == KernelClass::kCommunication) {
      ++out.comm_kernels;
      comm_by_stream[k.stream].push_back(k.span);
    } else {
      ++out.compute_kernels;
      compute.push_back(k.span);
    }
  }
  const IntervalSet compute_set = unite(std::move(compute));
  std::vector<Interval> all_comm;
  std::vector<IntervalSet> per_stream;
  for (auto& [stream, spans] : comm_by_stream) {
    all_comm.insert(all_comm.end(), spans.begin(), spans.end());
    per_stream.push_back(unite(std::move(spans)));
  }
  const IntervalSet comm_set = unite(std::move(all_comm));
  // Time some stream's NCCL kernels share with another stream's: the union, over streams, of the
  // stream's own time intersected with the union of every other stream's.
  std::vector<Interval> shared;
  for (size_t i = 0; i < per_stream.size(); ++i) {
    std::vector<Interval> others;
    for (size_t j = 0; j < per_stream.size(); ++j) {
      if (j != i) others.insert(others.end(), per_stream[j].begin(), per_stream[j].end());
    }
    const IntervalSet both = intersect(per_stream[i], unite(std::move(others)));
    shared.insert(shared.end(), both.begin(), both.end());
  }
  out.comm_streams = static_cast<int>(per_stream.size());
  out.compute_ns = total_length(compute_set);
  out.comm_ns = total_length(comm_set);
  out.comm_compute_overlap_ns = coverage(comm_set, compute_set);
  out.comm_cross_stream_ns = total_length(unite(std::move(shared)));
  return out;
}

}  // namespace acspeed
