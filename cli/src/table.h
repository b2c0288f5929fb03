// Plain-text tables for human output: a header row (units in the header), left-aligned columns.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace acspeed::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }
  void print(std::FILE* out = stdout) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace acspeed::cli
