// The shapes of a model's gradients, as the workers report them in their hello ("gradients"), and
// the bytes one rank puts into its collectives per step under each compression: what the step model
// (step_model.h) counts PowerSGD's wire bytes from, and what the tuner's note says compression
// would save when it was not searched.
//
// JSON (the hello's "gradients", a compute-only trial's metric "gradients"), identical entries counted:
//   {"matrices": [[rows, columns, element_bytes, count], ...],   gradients of two or more dimensions,
//                                                                  as PowerSGD sees them: the first
//                                                                  dimension x the rest
//    "vectors":  [[numel, element_bytes, count], ...]}            1-D (and 0-d) gradients
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "acspeed/config.h"

namespace acspeed::tuner {

struct GradientMatrices {
  int64_t rows = 0;
  int64_t columns = 0;
  int element_bytes = 0;  // of the gradient's dtype
  int64_t count = 0;      // tensors of this shape and dtype
};

struct GradientVectors {
  int64_t numel = 0;
  int element_bytes = 0;
  int64_t count = 0;
};

struct GradientLayout {
  std::vector<GradientMatrices> matrices;
  std::vector<GradientVectors> vectors;

  bool empty() const { return matrices.empty() && vectors.empty(); }
};

// The bytes one rank hands its collectives per step under `config`'s compression, before the
// algorithm's factor (step_model.h): none: the gradients; fp16/bf16: 2 bytes per element of wider
// gradients (as the hook packs them); powersgd: per matrix the factors P (rows x r) and Q (columns x
// r) at the clamped rank r = min(powersgd_rank, rows, columns), plus the 1-D gradients whole, all in
// the factors' dtype (fp32 for half-precision gradients: python/acspeed/engine/powersgd.py work_dtype).
int64_t sent_bytes(const GradientLayout& layout, const CommConfig& config);

// nlohmann::json (ADL). from_json: InvalidArgument naming an entry that is not the documented array
// of positive integers.
void to_json(nlohmann::json& j, const GradientLayout& layout);
void from_json(const nlohmann::json& j, GradientLayout& layout);

}  // namespace acspeed::tuner
