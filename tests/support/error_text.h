// What a GoogleTest suite asserts about bad input: the message of the InvalidArgument it raises.
#pragma once

#include <functional>
#include <string>

#include "acspeed/error.h"

namespace acspeed::testing {

// The message of the InvalidArgument `f` throws; "" when it throws none.
inline std::string invalid_argument_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

}  // namespace acspeed::testing
