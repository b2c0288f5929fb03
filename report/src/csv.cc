// The CSV report: one row per trial, units in the header, RFC 4180 (CRLF line ends, fields quoted
// by csv_field). Missing values are empty fields. The columns are trial_columns.h's CSV ones,
// documented in docs/report-format.md.
#include "render.h"
#include "trial_columns.h"

namespace acspeed::report {
namespace {

std::string row(const std::vector<std::string>& fields) {
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) line += ',';
    line += csv_field(fields[i]);
  }
  return line + "\r\n";
}

}  // namespace

std::string csv_field(std::string_view text) {
  const bool needs_quotes = text.find_first_of(",\"\r\n") != std::string_view::npos ||
                            (!text.empty() && (text.front() == ' ' || text.back() == ' '));
  if (!needs_quotes) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string render_csv(const Report& r) {
  std::vector<const TrialColumn*> columns;
  for (const auto& column : trial_columns()) {
    if (column.in(kInCsv)) columns.push_back(&column);
  }
  std::vector<std::string> fields;
  for (const auto* column : columns) fields.emplace_back(column->name);
  std::string out = row(fields);
  for (const auto& t : r.trials) {
    fields.clear();
    for (const auto* column : columns) fields.push_back(csv_cell(*column, r, t));
    out += row(fields);
  }
  return out;
}

}  // namespace acspeed::report
