// The model signature decisions are matched by: a digest of the parameters' names, shapes and
// dtypes in registration order. Two models with the same parameters share decisions whatever their
// Python class is called; a changed layer gives a new signature.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace acspeed {

struct ParamInfo {
  std::string name;            // "layer1.0.conv1.weight"
  std::vector<int64_t> shape;  // {64, 64, 3, 3}
  std::string dtype;           // "float32"
};

// "p<count>-<16 hex digits>", e.g. "p161-3f2a9c0d11b2e845": FNV-1a 64 over a canonical text.
std::string model_signature(const std::vector<ParamInfo>& params);

}  // namespace acspeed
