#include "acspeed/gpu_sharing.h"

namespace acspeed {

bool gpus_shared(bool asked, int64_t ranks_per_node, int64_t gpus) {
  return asked && gpus > 0 && ranks_per_node > gpus;
}

}  // namespace acspeed
