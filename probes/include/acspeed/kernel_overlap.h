// How GPU kernels of one process overlapped in time: NCCL kernels with compute kernels (the
// communication hidden behind backward compute) and NCCL kernels of different streams with each
// other (two communication lanes in flight at once). Input: kernel records from any trace (CUPTI
// activity records, or a torch.profiler trace); kernels are classified by kernel_class.h. The GPU
// check of the comm hook (tests/gpu/check_hook.sh) asserts on this.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "acspeed/interval.h"

namespace acspeed {

struct KernelRecord {
  std::string name;
  int64_t stream = 0;  // the stream id the trace gives; only equality matters
  Interval span;       // nanoseconds (any origin, the same for every record)
};

struct KernelOverlap {
  int compute_kernels = 0;
  int comm_kernels = 0;
  int comm_streams = 0;               // distinct streams NCCL kernels ran on
  int64_t compute_ns = 0;             // time covered by a compute kernel
  int64_t comm_ns = 0;                // time covered by an NCCL kernel
  int64_t comm_compute_overlap_ns = 0;  // time covered by both
  int64_t comm_cross_stream_ns = 0;   // time NCCL kernels of two or more streams ran at once
};

// Throws InvalidArgument for a record whose span ends before it begins.
KernelOverlap kernel_overlap(const std::vector<KernelRecord>& kernels);

}  // namespace acspeed
