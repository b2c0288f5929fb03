#include "acspeed/json_io.h"

namespace acspeed::json_io {

json parse(std::string_view text, std::string_view what) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    ACS_THROW(InvalidArgument, "{} is not valid JSON: {}", what, e.what());
  }
}

std::string shown(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

void wrong_type(std::string_view key, std::string_view expected, const json& value) {
  ACS_THROW(InvalidArgument, "'{}' must be {}, got {}", key, expected, shown(value));
}

void require_object(const json& j, std::string_view what) {
  if (!j.is_object()) ACS_THROW(InvalidArgument, "{} must be a JSON object, got {}", what, shown(j));
}

}  // namespace acspeed::json_io
