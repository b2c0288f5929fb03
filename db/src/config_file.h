// Reading the file ACSPEED_CONFIG names, which may be anything: a directory, a FIFO nobody writes
// to (opening it for reading would block the training job forever), a device, a huge file.
#pragma once

#include <cstdint>
#include <string>

namespace acspeed {

// A config or a decisions export is a few KiB; the largest export of a busy store a few MiB.
inline constexpr int64_t kMaxConfigFileBytes = 64 << 20;

// The content of the regular file `path`, opened without blocking. Throws InvalidArgument naming
// the path and what it is when it cannot be read, is not a regular file, or holds more than
// kMaxConfigFileBytes.
std::string read_config_file(const std::string& path);

}  // namespace acspeed
