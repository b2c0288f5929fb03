// Which GPU kernels are communication: NCCL's device kernels (ncclDevKernel_*, ncclSymkDevKernel_*
// and the older ncclKernel_*), by name as CUPTI reports it (plain or Itanium-mangled). Everything
// else is compute.
#pragma once

#include <string_view>

namespace acspeed {

enum class KernelClass { kCompute, kCommunication };

KernelClass classify_kernel(std::string_view name);

}  // namespace acspeed
