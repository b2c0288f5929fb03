// The trial worker's Python module, in one place: what the launcher runs (`python -m
// acspeed._worker.worker`, trial_runner.cc; and `python -m acspeed._worker.check` for --dry-run) and the source file whose frame marks the worker's
// main thread in a rank's stack dump (rank_failure.cc). The worker prints its failure line under the
// same name (python/acspeed/_worker/worker.py uses its own module name).
#pragma once

#include <algorithm>
#include <string>
#include <string_view>

namespace acspeed::tuner {

inline constexpr std::string_view kWorkerModule = "acspeed._worker.worker";
// The check of --model and --data the workers run at start-up, as a program: what --dry-run runs.
inline constexpr std::string_view kCheckModule = "acspeed._worker.check";
inline constexpr int kCheckUsageExit = 2;  // check.py's EXIT_USAGE: the model or data cannot be used

// "acspeed/_worker/worker.py": the module's file below its package root (python/ in the checkout,
// site-packages when installed), as it appears at the end of a frame's path.
inline std::string worker_source_file() {
  std::string path(kWorkerModule);
  std::replace(path.begin(), path.end(), '.', '/');
  return path + ".py";
}

}  // namespace acspeed::tuner
