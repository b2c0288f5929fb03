// Link rates as people and tc write them: "500mbit", "1.5gbit" (SI units, bit/s). Shared by the
// emulated cluster (testbed/, which caps links at these rates) and acspeed-tune's predictions
// (cli/), which read the rate an emulated cluster's instance type names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace acspeed {

inline constexpr int64_t kMinRateBps = 1'000'000;          // 1mbit
inline constexpr int64_t kMaxRateBps = 100'000'000'000;    // 100gbit

// "500mbit", "1.5gbit", "800kbit", "2000000bit" (case-insensitive) -> bit/s, within
// [kMinRateBps, kMaxRateBps]. Throws InvalidArgument naming `what`, the text and the grammar.
int64_t parse_rate(std::string_view what, std::string_view text);
// The largest unit that keeps the number whole: 1'500'000'000 -> "1500mbit".
std::string format_rate(int64_t bps);

// What the nodes of an emulated cluster see as ACSPEED_INSTANCE_TYPE: this prefix, then the
// profile (testbed/include/acspeed/testbed/profile.h): "testbed-2x1@1gbit".
inline constexpr std::string_view kTestbedInstanceTypePrefix = "testbed-";
// The link rate such an instance type names ("testbed-2x1@1gbit" -> 1 Gbit/s); nullopt for another
// instance type, an uncapped profile, or one that only looks like a profile.
std::optional<int64_t> testbed_link_bps(std::string_view instance_type);

}  // namespace acspeed
