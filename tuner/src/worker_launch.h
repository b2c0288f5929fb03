// How this node's trial workers are launched for a session (trial_runner.h's WorkerLaunch), the
// work folder they share with the tuner, and what they said when they started.
#pragma once

#include <string>

#include "acspeed/tuner/session.h"
#include "trial_runner.h"

namespace acspeed::tuner {

// A new folder for the control socket and the worker logs (short path: Unix sockets allow ~107
// bytes); Error when none can be made.
std::string make_work_dir();

// The launch for `options`' model and node, its sockets and logs in `work_dir`.
WorkerLaunch make_launch(const TuneOptions& options, const std::string& work_dir);

// The session's line on the started workers: world size, nodes, backend, device, model, its size,
// signature and probe.
std::string describe_workers(const WorkerHello& hello);

}  // namespace acspeed::tuner
