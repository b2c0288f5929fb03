// Small string helpers shared by every part.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace acspeed {

// join({"a", "b"}) == "a, b"
inline std::string join(const std::vector<std::string>& items, std::string_view separator = ", ") {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

}  // namespace acspeed
