// The iproute2 commands that build and shape a cluster, as data: each is an argv (never a shell
// string) plus, for `tc -batch -`, the lines fed on stdin. Building them is pure, so tests check
// exactly what would run; cluster.cc executes them.
//
// Shaping (HTB; this kernel has no netem/fq): on every node's eth0 (uplink) and on its hub port
// (downlink), a root HTB class 1:1 capped at RATE holding a default leaf 1:2. With a per-flow cap,
// the uplink also gets kFlowBuckets leaves 1:100.. capped at FLOWRATE, and a classic-BPF filter
// puts each TCP segment into leaf (sport + dport) mod kFlowBuckets, so every connection (both
// directions hash alike) is held to FLOWRATE while the node as a whole stays under RATE.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "acspeed/testbed/layout.h"
#include "acspeed/testbed/profile.h"

namespace acspeed::testbed {

inline constexpr int kFlowBuckets = 256;
inline constexpr uint32_t kFlowFirstMinor = 0x100;

struct ToolCommand {
  std::vector<std::string> argv;  // argv[0] is "ip" or "tc"
  std::string input;              // stdin (tc -batch -), empty for most
};

struct LinkShape {
  int64_t rate_bps = 0;
  std::optional<int64_t> flow_rate_bps;
};

// Namespaces, bridge, veth pairs, addresses, then shaping when the profile has a RATE.
std::vector<ToolCommand> bring_up_commands(const ClusterLayout& layout, const Profile& profile);
// One `tc -n NETNS -batch -` that installs the HTB tree (and the flow filter) on dev.
ToolCommand shaping_command(const std::string& netns, const std::string& dev, const LinkShape& shape);

// HTB bucket size for a rate: 1 ms worth of bytes, at least 32 KiB (timer granularity would
// otherwise keep high rates below their cap).
int64_t burst_bytes(int64_t rate_bps);
// Classic BPF, in tc's "bytecode" syntax ("N,code jt jf k,..."), returning classid
// (major << 16) | (first_minor + (sport + dport) % buckets) for IPv4 TCP (unfragmented) and 0 (no
// match: HTB's default leaf) for everything else. buckets must be a power of two.
std::string flow_classifier_bytecode(uint32_t major, uint32_t first_minor, int buckets);

}  // namespace acspeed::testbed
