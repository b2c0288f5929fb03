#include "acspeed/precision.h"

#include "acspeed/error.h"
#include "acspeed/strings.h"

namespace acspeed {

const std::vector<std::string>& precision_names() {
  static const std::vector<std::string> names = {"amp", "fp32", "fp16", "bf16"};
  return names;
}

std::string_view to_string(Precision precision) { return precision_names()[static_cast<size_t>(precision)]; }

Precision parse_precision(std::string_view text, std::string_view what) {
  const auto& names = precision_names();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == text) return static_cast<Precision>(i);
  }
  ACS_THROW(InvalidArgument, "{} '{}' is not one of {}", what, text, join(names));
}

}  // namespace acspeed
