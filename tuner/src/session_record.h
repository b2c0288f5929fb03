// What a new session stores about itself before its first trial (db's SessionRecord): the key it
// tunes, the strategy and seed, the search space, the options that --resume reads back, and the
// versions of everything that measured it.
#pragma once

#include <string>

#include "acspeed/fingerprint.h"
#include "acspeed/store.h"
#include "acspeed/tuner/session.h"
#include "protocol.h"

namespace acspeed::tuner {

SessionRecord new_session_record(const TuneOptions& options, const WorkerHello& hello, const Fingerprint& fp,
                                 const std::string& strategy);

}  // namespace acspeed::tuner
