#include "table.h"

#include <algorithm>

#include <fmt/format.h>

namespace acspeed::cli {

void Table::print(std::FILE* out) const {
  std::vector<size_t> widths(header_.size(), 0);
  auto measure = [&widths](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);
  auto emit = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      line += i + 1 == widths.size() ? cell : fmt::format("{:<{}}  ", cell, widths[i]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    fmt::print(out, "{}\n", line);
  };
  emit(header_);
  for (const auto& row : rows_) emit(row);
}

}  // namespace acspeed::cli
