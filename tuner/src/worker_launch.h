// How this node's trial workers are launched for a session (trial_runner.h's WorkerLaunch), the
// work folder they share with the tuner, and what they said when they started.
#pragma once

#include <string>

#include "acspeed/tuner/session.h"
#include "trial_runner.h"

namespace acspeed::tuner {

// The pattern of the work folders (mkdtemp's, ending in XXXXXX): in the temporary directory
// (TMPDIR, else /tmp), or in /tmp when TMPDIR is no folder or its path leaves the control socket's
// path too long for a Unix socket (107 bytes).
std::string work_dir_pattern();

// A new folder for the control socket and the worker logs (work_dir_pattern()); Error when none can
// be made.
std::string make_work_dir();

// Keeps the work folder (its worker logs, without torchrun's own folders) when `keep`, and returns its
// path; else removes it and returns "".
std::string close_work_dir(const std::string& work_dir, bool keep);

// The launch for `options`' model and node, its sockets and logs in `work_dir`.
WorkerLaunch make_launch(const TuneOptions& options, const std::string& work_dir);

// The session's line on the started workers: world size, nodes, backend, device, model, its size,
// signature and probe.
std::string describe_workers(const WorkerHello& hello);

}  // namespace acspeed::tuner
