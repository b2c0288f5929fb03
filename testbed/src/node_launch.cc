#include "acspeed/testbed/node_launch.h"

#include <fmt/format.h>

#include "acspeed/error.h"

namespace acspeed::testbed {

EnvList node_environment(const ClusterLayout& layout, const Profile& profile, int rank, int master_port) {
  ACS_ENFORCE(rank >= 0 && rank < static_cast<int>(layout.nodes.size()), "node {} of {}", rank,
              layout.nodes.size());
  const auto& node = layout.nodes[static_cast<size_t>(rank)];
  return {
      {"NODE_RANK", std::to_string(rank)},
      {"NNODES", std::to_string(layout.nodes.size())},
      {"NPROC_PER_NODE", std::to_string(profile.procs_per_node)},
      {"NODE_ADDR", node.address},
      {"MASTER_ADDR", layout.nodes.front().address},
      {"MASTER_PORT", std::to_string(master_port)},
      {"GLOO_SOCKET_IFNAME", node.ifname},
      {"NCCL_SOCKET_IFNAME", node.ifname},
      {"ACSPEED_INSTANCE_TYPE", profile.instance_type()},
      {"ACSPEED_TESTBED", layout.name},
  };
}

std::vector<std::string> torchrun_command(const ClusterLayout& layout, const Profile& profile,
                                          int rank, int master_port, const TorchrunOptions& options) {
  if (options.script_and_args.empty()) {
    ACS_THROW(InvalidArgument, "--torchrun needs a script after '--' (e.g. -- examples/Pytorch_ddp_benchmark.py)");
  }
  const auto& node = layout.nodes.at(static_cast<size_t>(rank));
  std::vector<std::string> argv = {
      options.python,
      "-m",
      "torch.distributed.run",
      fmt::format("--nnodes={}", layout.nodes.size()),
      fmt::format("--nproc_per_node={}", profile.procs_per_node),
      "--rdzv_backend=c10d",
      fmt::format("--rdzv_endpoint={}:{}", layout.nodes.front().address, master_port),
      fmt::format("--rdzv_id={}", layout.name),
      fmt::format("--rdzv_conf=is_host={}", rank == 0 ? 1 : 0),
      fmt::format("--local_addr={}", node.address),
  };
  if (!options.log_dir.empty()) argv.push_back(fmt::format("--log-dir={}", options.log_dir));
  argv.insert(argv.end(), options.script_and_args.begin(), options.script_and_args.end());
  return argv;
}

std::vector<int> cpus_for_node(const std::vector<int>& available, int nodes, int rank) {
  ACS_ENFORCE(!available.empty() && nodes > 0 && rank >= 0 && rank < nodes,
              "cpus_for_node({} CPUs, {} nodes, rank {})", available.size(), nodes, rank);
  const size_t count = available.size();
  const size_t n = static_cast<size_t>(nodes);
  if (count < n) return {available[static_cast<size_t>(rank) % count]};
  const size_t block = count / n;
  const auto first = available.begin() + static_cast<long>(block * static_cast<size_t>(rank));
  return std::vector<int>(first, first + static_cast<long>(block));
}

}  // namespace acspeed::testbed
