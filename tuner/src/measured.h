// A configuration the session measured (a search trial, or one run of a decision pair), as the
// search, the decision and a resumed session see it. Private to the session's files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "acspeed/config.h"
#include "acspeed/tuner/strategy.h"
#include "acspeed/tuner/trial_metrics.h"

namespace acspeed::tuner {

struct Measured {
  int64_t ordinal = -1;  // the trial's ordinal in its session
  CommConfig config;
  std::string status;  // ok|failed|timeout
  std::string error;
  // The median step time (s) of a trial that completed with finite losses; kFailedCost otherwise.
  double step_s = kFailedCost;
  // What the search ranks it by (s): step_s, or for a config that changes numerics what the
  // convergence guard makes of it (guard.h: step_s x the upper end of its step inflation);
  // kFailedCost when it failed or is not ranked.
  double ranking_cost = kFailedCost;
  std::vector<double> step_times_s;  // raw, max over ranks per step
  TrialMetrics metrics;
};

// One run of a decision pair (role candidate|baseline) stored by an interrupted session.
struct PairTrial {
  int pair = 0;
  std::string role;
  Measured run;
};

}  // namespace acspeed::tuner
