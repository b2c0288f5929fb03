#include "acspeed/model_signature.h"

#include <fmt/format.h>

namespace acspeed {

std::string model_signature(const std::vector<ParamInfo>& params) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  auto feed = [&hash](const std::string& text) {
    for (unsigned char c : text) {
      hash ^= c;
      hash *= 0x100000001b3ULL;
    }
  };
  for (const auto& param : params) {
    std::string canonical = param.name + ":" + param.dtype + ":";
    for (size_t i = 0; i < param.shape.size(); ++i) {
      canonical += (i ? "x" : "") + std::to_string(param.shape[i]);
    }
    feed(canonical + ";");
  }
  return fmt::format("p{}-{:016x}", params.size(), hash);
}

}  // namespace acspeed
