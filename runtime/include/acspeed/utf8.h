// Text that crosses into Python or JSON must be well-formed UTF-8: pybind11 raises
// UnicodeDecodeError on anything else, and nlohmann refuses to dump it. Messages quote what the user
// gave (a file's bytes, a path), which can be anything.
#pragma once

#include <string>
#include <string_view>

namespace acspeed {

// True when `text` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, <= U+10FFFF).
bool is_utf8(std::string_view text);

// `text` with every byte that is not part of a well-formed UTF-8 sequence written as \xNN (lower-case
// hex); well-formed text comes back unchanged.
std::string utf8_escaped(std::string_view text);

}  // namespace acspeed
