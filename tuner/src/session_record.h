// What a new session stores about itself before its first trial (db's SessionRecord): the key it
// tunes, the strategy and seed, the search space, the options that --resume reads back, and the
// versions of everything that measured it; the key and versions its decision is stored with; the
// time stamps of its records.
#pragma once

#include <string>

#include "acspeed/fingerprint.h"
#include "acspeed/store.h"
#include "acspeed/tuner/session.h"
#include "protocol.h"

namespace acspeed::tuner {

SessionRecord new_session_record(const TuneOptions& options, const WorkerHello& hello, const Fingerprint& fp,
                                 const std::string& strategy);

// A decision of session `session_id` before the search's outcome fills it: its key (the workers
// count the nodes by the rule `import acspeed` looks up with, node_count.h), the model, torch's own
// NCCL and CUDA versions (what `import acspeed` compares with) and the per-device batch size.
Decision new_decision(const TuneOptions& options, const WorkerHello& hello, const Fingerprint& fp,
                      int64_t session_id);

// Now, as the store's time stamps: "2026-01-02T03:04:05.678Z".
std::string utc_now();

}  // namespace acspeed::tuner
