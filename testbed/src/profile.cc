#include "acspeed/testbed/profile.h"

#include <cctype>

#include <fmt/format.h>

#include "acspeed/error.h"

namespace acspeed::testbed {
namespace {

constexpr std::string_view kGrammar =
    "expected NODESxPROCS[@RATE[/FLOWRATE]] with NODES 1..64, PROCS 1..256 and rates such as "
    "500mbit or 1gbit, e.g. 2x1@1gbit or 4x1@2gbit/500mbit";

bool all_digits(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

int parse_count(std::string_view profile, std::string_view field, std::string_view text, int max) {
  if (!all_digits(text) || text.size() > 4) {
    ACS_THROW(InvalidArgument, "profile '{}': {} '{}' is not a whole number; {}", profile, field,
              text, kGrammar);
  }
  const int value = std::stoi(std::string(text));
  if (value < 1 || value > max) {
    ACS_THROW(InvalidArgument, "profile '{}': {} {} is outside 1..{}; {}", profile, field, value,
              max, kGrammar);
  }
  return value;
}

}  // namespace

Profile parse_profile(std::string_view text) {
  Profile p;
  std::string_view shape = text;
  std::string_view rates;
  if (const auto at = text.find('@'); at != std::string_view::npos) {
    shape = text.substr(0, at);
    rates = text.substr(at + 1);
    if (rates.empty()) {
      ACS_THROW(InvalidArgument, "profile '{}': nothing after '@'; {}", text, kGrammar);
    }
  }
  const auto x = shape.find('x');
  if (x == std::string_view::npos) {
    ACS_THROW(InvalidArgument, "profile '{}' has no 'x' between NODES and PROCS; {}", text,
              kGrammar);
  }
  p.nodes = parse_count(text, "NODES", shape.substr(0, x), kMaxNodes);
  p.procs_per_node = parse_count(text, "PROCS", shape.substr(x + 1), kMaxProcsPerNode);
  if (!rates.empty()) {
    std::string_view rate = rates;
    if (const auto slash = rates.find('/'); slash != std::string_view::npos) {
      rate = rates.substr(0, slash);
      p.flow_rate_bps = parse_rate(fmt::format("profile '{}': FLOWRATE", text), rates.substr(slash + 1));
    }
    p.rate_bps = parse_rate(fmt::format("profile '{}': RATE", text), rate);
    if (p.flow_rate_bps && *p.flow_rate_bps > *p.rate_bps) {
      ACS_THROW(InvalidArgument, "profile '{}': FLOWRATE {} is above RATE {}; a flow cannot be "
                "faster than its link", text, format_rate(*p.flow_rate_bps), format_rate(*p.rate_bps));
    }
  }
  return p;
}

std::string Profile::text() const {
  std::string out = fmt::format("{}x{}", nodes, procs_per_node);
  if (rate_bps) out += "@" + format_rate(*rate_bps);
  if (flow_rate_bps) out += "/" + format_rate(*flow_rate_bps);
  return out;
}

std::string Profile::instance_type() const { return std::string(kTestbedInstanceTypePrefix) + text(); }

bool Profile::operator==(const Profile& other) const {
  return nodes == other.nodes && procs_per_node == other.procs_per_node &&
         rate_bps == other.rate_bps && flow_rate_bps == other.flow_rate_bps;
}

}  // namespace acspeed::testbed
