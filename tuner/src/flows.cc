#include "acspeed/tuner/flows.h"

#include <algorithm>

#include "acspeed/comm_methods.h"

namespace acspeed::tuner {

bool groups_per_role(std::string_view backend, std::string_view device) {
  return device == "cuda" && backend.find("nccl") != std::string_view::npos;
}

int flows(const CommConfig& config, const FlowSetup& setup) {
  const AlgorithmInfo& algorithm = info(config.algorithm);
  const int per_lane = setup.groups_per_role ? 1 : algorithm.crossing_phases;
  const bool equal_nodes = setup.nnodes > 0 && setup.world_size % setup.nnodes == 0;
  const int inter_groups = algorithm.by_node && equal_nodes ? std::max(1, setup.world_size / setup.nnodes) : 1;
  // NCCL carries the collectives exactly where the hook shares a group per role (groups_per_role).
  const int sockets = setup.groups_per_role && config.nccl_sockets ? config.nccl_sockets->sockets() : 1;
  return std::max(1, config.streams) * per_lane * inter_groups * sockets;
}

}  // namespace acspeed::tuner
