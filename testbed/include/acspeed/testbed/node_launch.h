// What a command started in a node sees: its environment, its CPUs, and (with --torchrun) the
// launcher command line. Pure functions, so tests check exactly what a node gets.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "acspeed/testbed/layout.h"
#include "acspeed/testbed/profile.h"

namespace acspeed::testbed {

using EnvList = std::vector<std::pair<std::string, std::string>>;

// NODE_RANK, NNODES, NPROC_PER_NODE, NODE_ADDR, MASTER_ADDR (node 0), MASTER_PORT,
// GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME (eth0), ACSPEED_INSTANCE_TYPE (the profile's) and
// ACSPEED_TESTBED (the cluster name).
EnvList node_environment(const ClusterLayout& layout, const Profile& profile, int rank, int master_port);

struct TorchrunOptions {
  std::string python;  // interpreter that runs torch.distributed.run
  std::vector<std::string> script_and_args;
  std::string log_dir;  // torchrun's --log-dir (empty: none given, torchrun makes /tmp/torchelastic_*)
};

// python -m torch.distributed.run with the c10d rendezvous hosted by node 0's agent at
// MASTER_ADDR:MASTER_PORT (is_host given explicitly: the hostname does not resolve to a node
// address), --local_addr set to the node's address and --log-dir when given, then the script and
// its arguments.
// c10d numbers the nodes itself (torchrun ignores --node_rank with it), so a worker's group rank
// may differ from NODE_RANK.
std::vector<std::string> torchrun_command(const ClusterLayout& layout, const Profile& profile,
                                          int rank, int master_port, const TorchrunOptions& options);

// CPUs for node `rank` when pinning: `available` split into equal consecutive blocks, one per
// node (the remainder unused); with fewer CPUs than nodes, node i shares available[i % size].
std::vector<int> cpus_for_node(const std::vector<int>& available, int nodes, int rank);

}  // namespace acspeed::testbed
