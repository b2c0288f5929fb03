#include "acspeed/log.h"

#include <atomic>
#include <cstdio>

#include "acspeed/error.h"

namespace acspeed {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kWarn)};
constexpr const char* kNames[] = {"debug", "info", "warn", "error", "off"};
}  // namespace

LogLevel parse_log_level(std::string_view text) {
  for (int i = 0; i < 5; ++i) {
    if (text == kNames[i]) return static_cast<LogLevel>(i);
  }
  ACS_THROW(InvalidArgument, "log level '{}' is not one of debug, info, warn, error, off", text);
}

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }

void log_write(LogLevel level, std::string_view message) {
  fmt::print(stderr, "acspeed [{}] {}\n", kNames[static_cast<int>(level)], message);
}

}  // namespace acspeed
