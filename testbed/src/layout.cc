#include "acspeed/testbed/layout.h"

#include <random>

#include <fmt/format.h>

#include "acspeed/error.h"
#include "acspeed/testbed/profile.h"

namespace acspeed::testbed {

std::vector<std::string> ClusterLayout::all_netns() const {
  std::vector<std::string> out;
  for (const auto& node : nodes) out.push_back(node.netns);
  out.push_back(hub_netns);
  return out;
}

void validate_cluster_name(std::string_view name) {
  bool ok = !name.empty() && name.size() <= 12;
  for (char c : name) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'));
  if (!ok) {
    ACS_THROW(InvalidArgument,
              "cluster name '{}' is not accepted: use 1 to 12 characters from a-z and 0-9", name);
  }
}

std::string random_cluster_name() {
  std::random_device device;
  return fmt::format("{:08x}", static_cast<uint32_t>(device()));
}

ClusterLayout make_layout(std::string_view name, int nodes) {
  validate_cluster_name(name);
  if (nodes < 1 || nodes > kMaxNodes) {
    ACS_THROW(InvalidArgument, "node count {} is outside 1..{}", nodes, kMaxNodes);
  }
  ClusterLayout layout;
  layout.name = std::string(name);
  layout.hub_netns = fmt::format("{}{}-hub", kNetnsPrefix, name);
  for (int rank = 0; rank < nodes; ++rank) {
    layout.nodes.push_back(NodeLayout{rank, fmt::format("{}{}-n{}", kNetnsPrefix, name, rank),
                                      fmt::format("{}.{}", kSubnet, rank + 1),
                                      std::string(kNodeIfname), fmt::format("p{}", rank)});
  }
  return layout;
}

std::string cluster_of_netns(std::string_view netns) {
  if (netns.substr(0, kNetnsPrefix.size()) != kNetnsPrefix) return {};
  const std::string_view rest = netns.substr(kNetnsPrefix.size());
  const auto dash = rest.rfind('-');
  if (dash == std::string_view::npos || dash == 0) return {};
  const std::string_view role = rest.substr(dash + 1);
  const bool node_role = role.size() >= 2 && role[0] == 'n' &&
                         role.find_first_not_of("0123456789", 1) == std::string_view::npos;
  if (role != "hub" && !node_role) return {};
  return std::string(rest.substr(0, dash));
}

std::string netns_path(std::string_view netns) { return fmt::format("{}/{}", kNetnsDir, netns); }

}  // namespace acspeed::testbed
