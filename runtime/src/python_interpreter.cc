#include "acspeed/python_interpreter.h"

#include <filesystem>

#include "acspeed/settings.h"

namespace acspeed {

std::string python_interpreter() {
  if (auto python = setting_string("ACSPEED_PYTHON")) return *python;
  return ACSPEED_DEFAULT_PYTHON;
}

std::string python_source_dir() {
  std::error_code ec;
  return std::filesystem::is_directory(ACSPEED_PYTHON_SOURCE_DIR "/acspeed", ec) ? ACSPEED_PYTHON_SOURCE_DIR : "";
}

}  // namespace acspeed
