#include "acspeed/tuner/gradient_layout.h"

#include "acspeed/comm_methods.h"

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "acspeed/error.h"
#include "acspeed/json_io.h"

namespace acspeed::tuner {
namespace {

using nlohmann::json;

constexpr int kMaxElementBytes = 16;

// One entry: `size` positive integers, the one at `element_at` (element bytes) at most kMaxElementBytes.
std::vector<int64_t> entry_of(const json& value, const std::string& key, size_t size, size_t element_at,
                              const char* form) {
  const auto numbers = json_io::as<std::vector<int64_t>>(value, key);
  if (numbers.size() != size || std::any_of(numbers.begin(), numbers.end(), [](int64_t n) { return n < 1; }) ||
      numbers[element_at] > kMaxElementBytes) {
    json_io::wrong_type(key, form, value);
  }
  return numbers;
}

// The entries of the array `key` (absent: none).
template <typename Add>
void entries(const json& j, const std::string& key, Add&& add) {
  if (!j.contains(key)) return;
  const json& list = j.at(key);
  if (!list.is_array()) json_io::wrong_type(key, "an array", list);
  for (size_t i = 0; i < list.size(); ++i) add(list[i], key + "[" + std::to_string(i) + "]");
}

}  // namespace

int64_t sent_bytes(const GradientLayout& layout, const CommConfig& config) {
  const CompressionInfo& compression = info(config.compression);
  int64_t total = 0;
  for (const auto& v : layout.vectors) total += v.count * v.numel * wire_element_bytes(compression, v.element_bytes);
  for (const auto& m : layout.matrices) {
    const int64_t element = wire_element_bytes(compression, m.element_bytes);
    if (compression.form == WireForm::kLowRank) {  // each matrix as its rank's two factors
      const int64_t rank = std::min<int64_t>({config.powersgd_rank, m.rows, m.columns});
      total += m.count * (m.rows + m.columns) * rank * element;
    } else {
      total += m.count * m.rows * m.columns * element;
    }
  }
  return total;
}

void to_json(json& j, const GradientLayout& layout) {
  json matrices = json::array();
  for (const auto& m : layout.matrices) matrices.push_back({m.rows, m.columns, m.element_bytes, m.count});
  json vectors = json::array();
  for (const auto& v : layout.vectors) vectors.push_back({v.numel, v.element_bytes, v.count});
  j = {{"matrices", std::move(matrices)}, {"vectors", std::move(vectors)}};
}

void from_json(const json& j, GradientLayout& layout) {
  json_io::require_object(j, "gradients");
  layout = GradientLayout{};
  entries(j, "matrices", [&](const json& value, const std::string& key) {
    const auto n = entry_of(value, key, 4, 2, "[rows, columns, element_bytes (1-16), count] of positive integers");
    layout.matrices.push_back({n[0], n[1], static_cast<int>(n[2]), n[3]});
  });
  entries(j, "vectors", [&](const json& value, const std::string& key) {
    const auto n = entry_of(value, key, 3, 1, "[numel, element_bytes (1-16), count] of positive integers");
    layout.vectors.push_back({n[0], static_cast<int>(n[1]), n[2]});
  });
}

}  // namespace acspeed::tuner
