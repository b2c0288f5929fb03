// Running a short program to completion and capturing what it prints (iproute2 tools, an
// interpreter asked for a version). It is started with spawn() (spawn.h): no shell, own process
// group, killed with us.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "acspeed/process/spawn.h"

namespace acspeed::process {

struct RunOptions {
  std::vector<std::string> argv;
  std::string input;                        // written to its stdin (which is then closed)
  bool capture_stderr = true;               // false: stderr passes through; only stdout is captured
  std::chrono::milliseconds timeout{0};     // 0 = none; on expiry its process group is killed
  // Throw Error naming the command, its exit status and its output when it does not exit 0.
  bool check = false;
  Environment env;  // set over the inherited environment (spawn.h)
};

struct RunResult {
  int exit_code = 0;       // exit_status.h: 128 + signal when killed
  bool timed_out = false;  // killed after RunOptions::timeout
  std::string output;      // stdout (and stderr with capture_stderr)
};

// Throws Error when the program cannot be started (not found, exec failed), and with `check` when
// it fails. Stdin and stdout are served together, so neither side can fill a pipe and block.
RunResult run(const RunOptions& options);

}  // namespace acspeed::process
