// Running child programs without a shell: argv goes to execvp as is, so user strings are never
// interpreted by a shell.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace acspeed {

struct CaptureResult {
  int exit_code = -1;  // -1 when the program could not be started or timed out
  bool timed_out = false;
  std::string output;  // standard output
};

// Runs argv[0] (looked up on PATH) with argv, capturing standard output; standard error passes
// through. Kills the child after `timeout`.
CaptureResult run_capture(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

}  // namespace acspeed
