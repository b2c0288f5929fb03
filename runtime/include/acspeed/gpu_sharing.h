// Ranks sharing GPUs (ACSPEED_SHARE_GPUS=1, or `acspeed-tune --share-gpus`): more ranks on a node than
// it has GPUs, each rank on GPU (local rank mod GPUs) with an NCCL host identity of its own
// (python/acspeed/share_gpus.py). One rule for the tuner (the key its decision is stored under) and
// for `import acspeed` (the key a job looks up), so a decision tuned with shared GPUs applies only to
// jobs that share GPUs, and never to one whose ranks each have their own GPU.
#pragma once

#include <cstdint>

namespace acspeed {

// Whether a node's ranks share its GPUs: sharing was asked for and the node runs more ranks than it
// has GPUs (gpus > 0; a node without GPUs shares nothing).
bool gpus_shared(bool asked, int64_t ranks_per_node, int64_t gpus);

}  // namespace acspeed
