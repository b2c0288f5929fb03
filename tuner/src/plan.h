// The session's plan: how many trials it expects (the progress display's total) and the lines a
// dry run prints (session.h's plan_lines).
#pragma once

#include <string>

#include "acspeed/tuner/search_space.h"

namespace acspeed::tuner {

// Search trials `strategy` plans for `space`: grid every point; model and descent at most a start
// and one sweep over every knob.
int planned_search_trials(const std::string& strategy, const SearchSpace& space);

}  // namespace acspeed::tuner
