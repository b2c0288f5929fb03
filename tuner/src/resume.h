// `--resume ID`: what a session takes over from its stored trials. The search results (each
// configuration once; a trial whose record cannot be read, or that does not say whether its losses
// stayed finite, is measured again), the runs of the decision pairs (a pair whose two runs were
// both stored is not run again), the step model's trials, and the next trial's ordinal.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "acspeed/store.h"
#include "acspeed/tuner/step_model.h"
#include "measured.h"
#include "protocol.h"

namespace acspeed::tuner {

struct ResumedSession {
  int64_t session_id = 0;
  std::vector<Measured> search;         // in the order stored
  std::vector<PairTrial> pair_trials;   // in the order stored
  std::vector<ModelTrial> model_trials;
  int64_t next_ordinal = 0;
};

// Session `id` of `store`, which must have tuned the workers' model signature at their world size
// (InvalidArgument when there is no such session, Error when it tuned something else). `note` is
// told about each stored trial measured again, then how many were reused.
ResumedSession resume_session(const Store& store, int64_t id, const WorkerHello& hello,
                              const std::function<void(const std::string&)>& note);

// Pair `index` of `stored` when both of its runs were stored, the candidate's with `candidate` (the
// latest of each when the pair was started again): runs[0] the candidate, runs[1] the baseline.
bool stored_pair(const std::vector<PairTrial>& stored, int index, const CommConfig& candidate, Measured runs[2]);

}  // namespace acspeed::tuner
