// The trials table's columns, once for every format that shows trials row by row (CSV, Markdown,
// HTML): each column's machine name, its human title, its kind (which says its unit and how each
// format writes it), the formats it appears in, and how its value is read from a trial.
//
// To add a column: add one row to trial_columns() (trial_columns.cc), at the end (the CSV, a machine
// layout, only grows at its end), put its name in kHumanOrder where people should see it when it
// is in Markdown or HTML, and document it in docs/report-format.md. Every format's header, cell
// formatting and widths (HTML's error row spans the others) follow.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "acspeed/report/report.h"

namespace acspeed::report {

enum ColumnFormat : unsigned { kInCsv = 1u, kInMarkdown = 2u, kInHtml = 4u, kInHuman = 6u, kInAll = 7u };

enum class ColumnKind {
  kCount,     // an integer (ids, ordinals, step counts)
  kSeconds,   // CSV: seconds; people: milliseconds, "(ms)" in the title
  kMib,       // MiB
  kRate,      // samples/s
  kRatio,     // people: "1.234x"
  kSpeedup,   // a ratio to the baseline; people: "baseline" for a trial that runs DDP's defaults
  kFraction,  // people: "83%"
  kLoss,      // people: the loss, or "NaN/Inf" when a loss was not finite
  kText,      // literal text; people: "-" when empty
  kConfig,    // text: a config for people (HTML: a wide cell)
  kStatus,    // text: ok|failed|timeout (HTML: a coloured badge)
};

using CellValue = std::variant<std::optional<double>, std::string>;

struct TrialColumn {
  std::string_view name;   // CSV header, with its unit ("step_p50_s"); "" when not in the CSV
  std::string title;       // human header, without the unit the kind adds ("p50")
  ColumnKind kind;
  unsigned formats;        // ColumnFormat bits
  CellValue (*value)(const Report& report, const TrialSummary& trial);

  bool in(ColumnFormat format) const { return (formats & format) != 0; }
  bool numeric() const;            // right-aligned for people
  std::string human_title() const;  // "p50 (ms)"
};

// Every column, in the CSV's order.
const std::vector<TrialColumn>& trial_columns();
// The columns `format` (Markdown or HTML) shows, in the order people read them (kHumanOrder).
std::vector<const TrialColumn*> human_columns(ColumnFormat format);
// Those of human_columns(format) with a value in at least one of the report's trials (the HTML page
// leaves out what this session did not measure: the preamble says why).
std::vector<const TrialColumn*> shown_columns(ColumnFormat format, const Report& report);

// The cell as CSV writes it (numbers in SI units with 9 significant digits, "" when missing) and as
// people read it (unescaped; "-" when missing).
std::string csv_cell(const TrialColumn& column, const Report& report, const TrialSummary& trial);
std::string human_cell(const TrialColumn& column, const Report& report, const TrialSummary& trial);

}  // namespace acspeed::report
