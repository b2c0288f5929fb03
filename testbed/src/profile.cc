#include "acspeed/testbed/profile.h"

#include <array>
#include <cctype>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "acspeed/error.h"

namespace acspeed::testbed {
namespace {

constexpr std::string_view kGrammar =
    "expected NODESxPROCS[@RATE[/FLOWRATE]] with NODES 1..64, PROCS 1..256 and rates such as "
    "500mbit or 1gbit, e.g. 2x1@1gbit or 4x1@2gbit/500mbit";

// Largest first, so format_rate picks the largest unit that keeps the number whole.
constexpr std::array<std::pair<std::string_view, int64_t>, 4> kUnits = {{
    {"gbit", 1'000'000'000}, {"mbit", 1'000'000}, {"kbit", 1'000}, {"bit", 1}}};

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

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

int64_t parse_rate(std::string_view what, std::string_view text) {
  const std::string low = lower(text);
  for (const auto& [unit, scale] : kUnits) {
    if (low.size() <= unit.size() || low.compare(low.size() - unit.size(), unit.size(), unit) != 0) {
      continue;
    }
    const std::string number = low.substr(0, low.size() - unit.size());
    const auto dot = number.find('.');
    const bool ok = dot == std::string::npos
                        ? all_digits(number)
                        : all_digits(number.substr(0, dot)) && all_digits(number.substr(dot + 1));
    if (!ok || number.size() > 12) break;
    const double bps = std::stod(number) * static_cast<double>(scale);
    if (bps < static_cast<double>(kMinRateBps) || bps > static_cast<double>(kMaxRateBps)) {
      ACS_THROW(InvalidArgument, "{} '{}' is outside {}..{}", what, text, format_rate(kMinRateBps),
                format_rate(kMaxRateBps));
    }
    return static_cast<int64_t>(std::llround(bps));
  }
  ACS_THROW(InvalidArgument,
            "{} '{}' is not a rate: expected a number followed by bit, kbit, mbit or gbit "
            "(e.g. 500mbit, 1.5gbit)",
            what, text);
}

std::string format_rate(int64_t bps) {
  for (const auto& [unit, scale] : kUnits) {
    if (bps % scale == 0) return fmt::format("{}{}", bps / scale, unit);
  }
  return fmt::format("{}bit", bps);
}

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

std::string Profile::instance_type() const { return "testbed-" + text(); }

bool Profile::operator==(const Profile& other) const {
  return nodes == other.nodes && procs_per_node == other.procs_per_node &&
         rate_bps == other.rate_bps && flow_rate_bps == other.flow_rate_bps;
}

}  // namespace acspeed::testbed
