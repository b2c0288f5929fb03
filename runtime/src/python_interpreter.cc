#include "acspeed/python_interpreter.h"

#include "acspeed/settings.h"

namespace acspeed {

std::string python_interpreter() {
  if (auto python = setting_string("ACSPEED_PYTHON")) return *python;
  return ACSPEED_DEFAULT_PYTHON;
}

}  // namespace acspeed
