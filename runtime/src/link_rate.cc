#include "acspeed/link_rate.h"

#include <array>
#include <cctype>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "acspeed/error.h"

namespace acspeed {
namespace {

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

std::optional<int64_t> testbed_link_bps(std::string_view instance_type) {
  if (instance_type.substr(0, kTestbedInstanceTypePrefix.size()) != kTestbedInstanceTypePrefix) return std::nullopt;
  const std::string_view profile = instance_type.substr(kTestbedInstanceTypePrefix.size());
  const auto at = profile.find('@');
  const auto x = profile.find('x');
  // NODESxPROCS@RATE[/FLOWRATE]: the shape's counts are digits, the link is what comes before any '/'.
  if (at == std::string_view::npos || x == std::string_view::npos || x > at || !all_digits(profile.substr(0, x)) ||
      !all_digits(profile.substr(x + 1, at - x - 1))) {
    return std::nullopt;
  }
  const std::string_view rates = profile.substr(at + 1);
  try {
    return parse_rate("instance type", rates.substr(0, rates.find('/')));
  } catch (const InvalidArgument&) {
    return std::nullopt;
  }
}

}  // namespace acspeed
