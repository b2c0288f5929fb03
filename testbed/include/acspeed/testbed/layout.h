// Names and addresses of one emulated cluster. Everything lives inside network namespaces that
// acspeed-testbed creates, so two clusters never share an interface or address, and nothing is
// added to the host's own namespace:
//   acst-NAME-hub   the switch: bridge br0 with one port p<i> per node
//   acst-NAME-n<i>  node i: eth0 (the other end of p<i>) with address 10.254.213.<i+1>/24, and lo
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace acspeed::testbed {

// Every namespace acspeed-testbed makes starts with this; `down --all` removes exactly those.
inline constexpr std::string_view kNetnsPrefix = "acst-";
// A private /24 that only ever exists inside our namespaces (never routed, never on the host).
inline constexpr std::string_view kSubnet = "10.254.213";
inline constexpr int kPrefixLength = 24;
inline constexpr std::string_view kNodeIfname = "eth0";
inline constexpr std::string_view kBridge = "br0";
// Where `ip netns add` mounts the namespaces.
inline constexpr std::string_view kNetnsDir = "/run/netns";

struct NodeLayout {
  int rank = 0;
  std::string netns;     // acst-NAME-n<rank>
  std::string address;   // 10.254.213.<rank+1>
  std::string ifname;    // eth0, inside netns
  std::string hub_port;  // p<rank>, inside the hub namespace
};

struct ClusterLayout {
  std::string name;
  std::string hub_netns;  // acst-NAME-hub
  std::vector<NodeLayout> nodes;

  // Every namespace of the cluster, nodes first, hub last (the teardown order).
  std::vector<std::string> all_netns() const;
};

// Throws InvalidArgument unless name is 1..12 characters of [a-z0-9].
void validate_cluster_name(std::string_view name);
// 8 random hex digits (from std::random_device).
std::string random_cluster_name();
ClusterLayout make_layout(std::string_view name, int nodes);
// The cluster a namespace belongs to ("acst-ab12-n0" -> "ab12"); empty when it is not ours.
std::string cluster_of_netns(std::string_view netns);
std::string netns_path(std::string_view netns);

}  // namespace acspeed::testbed
