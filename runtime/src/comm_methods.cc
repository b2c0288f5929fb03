#include "acspeed/comm_methods.h"

#include <algorithm>

namespace acspeed {

const std::vector<AlgorithmInfo>& algorithms() {
  static const std::vector<AlgorithmInfo> table = {
      // kind, name, by node, crossing phases
      {Algorithm::kAllreduce, "allreduce", false, 1},
      {Algorithm::kReduceScatter, "reduce_scatter", false, 2},    // reduce-scatter, all-gather
      {Algorithm::kHierarchical, "hierarchical", true, 1},        // the inter-node all-reduce
  };
  return table;
}

const std::vector<CompressionInfo>& compressions() {
  static const std::vector<CompressionInfo> table = {
      // kind, name, display, schema, form, cast dtype, cast bytes, numerics, own compute, collectives, ranked
      {Compression::kNone, "none", "none", 1, WireForm::kAsIs, "", 0, false, false, 1, false},
      {Compression::kFp16, "fp16", "fp16", 1, WireForm::kCast, "float16", 2, true, false, 1, false},
      {Compression::kBf16, "bf16", "bf16", 1, WireForm::kCast, "bfloat16", 2, true, false, 1, false},
      {Compression::kPowerSgd, "powersgd", "PowerSGD", 2, WireForm::kLowRank, "", 0, true, true, 3, true},
  };
  return table;
}

const AlgorithmInfo& info(Algorithm algorithm) { return algorithms()[static_cast<size_t>(algorithm)]; }
const CompressionInfo& info(Compression compression) { return compressions()[static_cast<size_t>(compression)]; }

bool reduces_as_flat(Algorithm algorithm, int ranks_per_node) { return !info(algorithm).by_node || ranks_per_node <= 1; }

std::string own_compute_names(bool display) {
  std::string names;
  for (const auto& c : compressions()) {
    if (!c.own_compute) continue;
    if (!names.empty()) names += "/";
    names += display ? c.display_name : c.name;
  }
  return names;
}

int64_t wire_element_bytes(const CompressionInfo& compression, int element_bytes) {
  switch (compression.form) {
    case WireForm::kAsIs: return element_bytes;
    case WireForm::kCast: return std::min(element_bytes, compression.cast_bytes);  // a narrower bucket stays as it is
    case WireForm::kLowRank: return std::max(element_bytes, 4);
  }
  return element_bytes;
}

}  // namespace acspeed
