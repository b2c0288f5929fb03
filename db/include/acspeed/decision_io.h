// Decisions as versioned JSON: what `acspeed-tune configs export` writes, `configs import` and
// ACSPEED_CONFIG read. Format (documented in runtime/CONFIG.md):
//   {"format": "acspeed-decisions", "version": 1, "decisions": [{"instance_type": ..., "config": {...}, ...}]}
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "acspeed/store.h"

namespace acspeed {

inline constexpr int kDecisionsFormatVersion = 1;

std::string decisions_to_json(const std::vector<Decision>& decisions, int indent = 2);
// Throws InvalidArgument naming what is wrong (missing field, bad config, other format or version).
std::vector<Decision> decisions_from_json(std::string_view text);
// True when the text is a decisions export rather than a bare config.
bool is_decisions_document(std::string_view text);

}  // namespace acspeed
