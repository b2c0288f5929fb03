// Leveled logging to stderr. The level comes from ACSPEED_LOG_LEVEL (or --log-level); a message
// below the level is neither formatted nor written.
#pragma once

#include <string>
#include <string_view>

#include <fmt/format.h>

namespace acspeed {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

// Parses "debug|info|warn|error|off"; throws InvalidArgument naming the value otherwise.
LogLevel parse_log_level(std::string_view text);
void set_log_level(LogLevel level);
LogLevel log_level();
void log_write(LogLevel level, std::string_view message);

}  // namespace acspeed

#define ACS_LOG(level, ...)                                              \
  do {                                                                   \
    if (::acspeed::LogLevel::level >= ::acspeed::log_level()) {          \
      ::acspeed::log_write(::acspeed::LogLevel::level,                   \
                           fmt::format(__VA_ARGS__));                    \
    }                                                                    \
  } while (0)
#define ACS_DEBUG(...) ACS_LOG(kDebug, __VA_ARGS__)
#define ACS_INFO(...) ACS_LOG(kInfo, __VA_ARGS__)
#define ACS_WARN(...) ACS_LOG(kWarn, __VA_ARGS__)
#define ACS_ERROR(...) ACS_LOG(kError, __VA_ARGS__)
