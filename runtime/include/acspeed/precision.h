// The training precision: part of the key decisions are stored and looked up under, and how the
// tuner's workers train. The one list of names (settings, the CLI, imports and the Python side,
// through _core.PRECISIONS, all take it from here).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace acspeed {

enum class Precision {
  kAmp,   // autocast (fp16 on GPUs, bf16 on CPUs) with fp32 weights
  kFp32,
  kFp16,  // the model in fp16
  kBf16,  // the model in bf16
};

// "amp", "fp32", "fp16", "bf16", in the enum's order.
const std::vector<std::string>& precision_names();
std::string_view to_string(Precision precision);
// Throws InvalidArgument "`what` 'TEXT' is not one of amp, fp32, fp16, bf16".
Precision parse_precision(std::string_view text, std::string_view what = "precision");

}  // namespace acspeed
