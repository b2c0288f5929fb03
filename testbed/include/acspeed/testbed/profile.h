// Emulated-cluster profiles: NODESxPROCS[@RATE[/FLOWRATE]], e.g. "2x1@1gbit", "4x1@500mbit/200mbit".
// NODES network namespaces, PROCS processes per node, each node's link capped at RATE in each
// direction, and (optionally) every TCP flow leaving a node capped at FLOWRATE, as cloud NICs do.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "acspeed/link_rate.h"

namespace acspeed::testbed {

inline constexpr int kMaxNodes = 64;
inline constexpr int kMaxProcsPerNode = 256;
// Rates are runtime's (link_rate.h): acspeed-tune reads them too, without the testbed.
using acspeed::format_rate;
using acspeed::kMaxRateBps;
using acspeed::kMinRateBps;
using acspeed::parse_rate;

struct Profile {
  int nodes = 0;
  int procs_per_node = 0;
  std::optional<int64_t> rate_bps;       // per node and direction, bit/s; nullopt = uncapped
  std::optional<int64_t> flow_rate_bps;  // per TCP flow leaving a node; needs rate_bps

  // Canonical spelling ("2x1@1gbit"): parse_profile(p.text()) == p.
  std::string text() const;
  // What commands in a node see as ACSPEED_INSTANCE_TYPE: kTestbedInstanceTypePrefix + text().
  std::string instance_type() const;
  bool operator==(const Profile& other) const;
};

// Throws InvalidArgument naming the text and the grammar.
Profile parse_profile(std::string_view text);

}  // namespace acspeed::testbed
