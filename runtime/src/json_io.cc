#include "acspeed/json_io.h"

#include <algorithm>

#include <fmt/format.h>

namespace acspeed::json_io {
namespace {

constexpr std::string_view kAnyValue = "a JSON value (an object, array, string, number, true, false or null)";

// nlohmann's message without its "[json.exception.parse_error.101] " tag.
std::string untagged(std::string_view message) {
  const auto tag_end = message.find("] ");
  return std::string(message.front() == '[' && tag_end != std::string_view::npos ? message.substr(tag_end + 2)
                                                                                    : message);
}

// "at line L, column C: <what was read>; expected <what>" for a syntax error in `text`.
std::string syntax_problem(const json::parse_error& e, std::string_view text) {
  const size_t at = std::min<size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
  const std::string_view before = text.substr(0, at);
  const size_t line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
  const size_t line_start = before.rfind('\n');
  const size_t column = at - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
  // nlohmann: "... parse error at line 1, column 2: syntax error while parsing value - invalid literal;
  // last read: 'th'" or "... - unexpected '}'; expected string literal".
  const std::string message = e.what();
  const auto dash = message.find(" - ");
  std::string found = dash == std::string::npos ? untagged(message) : message.substr(dash + 3);
  std::string expected(kAnyValue);
  if (const auto pos = found.find("; expected "); pos != std::string::npos) {
    expected = found.substr(pos + 11);
    found.resize(pos);
  }
  if (const auto pos = found.find("; last read: "); pos != std::string::npos) {
    found = found.substr(0, pos) + " " + found.substr(pos + 13);
  }
  if (expected == "'[', '{', or a literal") expected = kAnyValue;
  if (expected == "string literal") expected = "a string in double quotes";
  if (expected == "end of input") expected = "nothing more (the end of the text)";
  return fmt::format("at line {}, column {}: {}; expected {}", line, column, found, expected);
}

}  // namespace

json parse(std::string_view text, std::string_view what) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    ACS_THROW(InvalidArgument, "{} is not valid JSON {}", what, syntax_problem(e, text));
  } catch (const json::exception& e) {  // a number out of range...
    ACS_THROW(InvalidArgument, "{} is not valid JSON: {}", what, untagged(e.what()));
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
