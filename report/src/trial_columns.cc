#include "trial_columns.h"

#include <algorithm>

#include <fmt/format.h>

#include "acspeed/comm_methods.h"
#include "render.h"

namespace acspeed::report {
namespace {

using Number = std::optional<double>;

Number stat(const TrialSummary& t, double StepStats::*field) {
  return t.stats ? Number((*t.stats).*field) : std::nullopt;
}

Number count(int64_t n) { return static_cast<double>(n); }

std::string text_of(const CellValue& value) { return std::get<std::string>(value); }

Number number_of(const CellValue& value) { return std::get<Number>(value); }

}  // namespace

const std::vector<TrialColumn>& trial_columns() {
  using K = ColumnKind;
  using R = const Report&;
  using T = const TrialSummary&;
  static const std::vector<TrialColumn> columns = {
      {"session_id", "Session", K::kCount, kInCsv, [](R r, T) -> CellValue { return count(r.session.id); }},
      {"trial_id", "Trial id", K::kCount, kInCsv, [](R, T t) -> CellValue { return count(t.record.id); }},
      {"ordinal", "#", K::kCount, kInAll, [](R, T t) -> CellValue { return count(t.record.ordinal); }},
      {"role", "Role", K::kText, kInAll, [](R, T t) -> CellValue { return std::string(to_string(t.record.role)); }},
      {"status", "Status", K::kStatus, kInAll, [](R, T t) -> CellValue { return std::string(to_string(t.record.status)); }},
      {"config", "Config", K::kConfig, kInAll, [](R, T t) -> CellValue { return t.config_text; }},
      {"bucket_cap_mb", "Bucket", K::kMib, kInCsv,
       [](R, T t) -> CellValue { return t.config ? t.config->bucket_cap_mb : std::nullopt; }},
      {"first_bucket_mb", "First bucket", K::kMib, kInCsv,
       [](R, T t) -> CellValue { return t.config ? t.config->first_bucket_mb : std::nullopt; }},
      {"gradient_as_bucket_view", "Gradient as bucket view", K::kText, kInCsv,
       [](R, T t) -> CellValue {
         if (!t.config || !t.config->gradient_as_bucket_view) return std::string();
         return std::string(*t.config->gradient_as_bucket_view ? "true" : "false");
       }},
      {"algorithm", "Algorithm", K::kText, kInCsv,
       [](R, T t) -> CellValue { return t.config ? std::string(to_string(t.config->algorithm)) : ""; }},
      {"streams", "Streams", K::kCount, kInCsv,
       [](R, T t) -> CellValue { return t.config ? count(t.config->streams) : std::nullopt; }},
      {"compression", "Compression", K::kText, kInCsv,
       [](R, T t) -> CellValue { return t.config ? std::string(to_string(t.config->compression)) : ""; }},
      {"steps", "Steps", K::kCount, kInAll,
       [](R, T t) -> CellValue { return count(static_cast<int64_t>(t.record.step_times_s.size())); }},
      {"step_p50_s", "p50", K::kSeconds, kInAll, [](R, T t) -> CellValue { return stat(t, &StepStats::p50); }},
      {"step_p90_s", "p90", K::kSeconds, kInAll, [](R, T t) -> CellValue { return stat(t, &StepStats::p90); }},
      {"step_p95_s", "p95", K::kSeconds, kInAll, [](R, T t) -> CellValue { return stat(t, &StepStats::p95); }},
      {"step_mean_s", "Mean", K::kSeconds, kInCsv, [](R, T t) -> CellValue { return stat(t, &StepStats::mean); }},
      // The whole job's rate in the CSV; people see the per-device rate, as the tuner's table and the
      // benchmark line print it (the title says which).
      {"samples_per_s", "Samples/s, all devices", K::kRate, kInCsv,
       [](R, T t) -> CellValue { return t.samples_per_s; }},
      {"samples_per_s_per_device", "Samples/s per device", K::kRate, kInAll,
       [](R r, T t) -> CellValue {
         if (!t.samples_per_s || r.session.world_size <= 0) return Number();
         return *t.samples_per_s / static_cast<double>(r.session.world_size);
       }},
      {"speedup_vs_baseline_x", "Speedup vs baseline", K::kSpeedup, kInAll,
       [](R, T t) -> CellValue { return t.speedup_vs_baseline; }},
      // Step inflation (tuner/include/acspeed/tuner/inflation.h) and speedup / inflation, beside the step speedup.
      {"inflation_x", "Inflation", K::kRatio, kInCsv,
       [](R, T t) -> CellValue {
         const auto& i = t.metrics.inflation;
         return i && i->kind == tuner::InflationKind::kMeasured ? Number(i->estimate) : std::nullopt;
       }},
      {"effective_speedup_x", "Effective speedup", K::kRatio, kInCsv,
       [](R, T t) -> CellValue { return effective_speedup_vs_baseline(t); }},
      {"compute_s", "Compute", K::kSeconds, kInAll, [](R, T t) -> CellValue { return t.metrics.compute_s; }},
      {"comm_s", "Comm", K::kSeconds, kInAll, [](R, T t) -> CellValue { return t.metrics.comm_s; }},
      {"exposed_comm_s", "Exposed comm", K::kSeconds, kInAll,
       [](R, T t) -> CellValue { return t.metrics.exposed_comm_s; }},
      {"compression_s", own_compute_names(true) + " compute", K::kSeconds, kInAll,
       [](R, T t) -> CellValue { return t.metrics.compression_s; }},
      // Every trial starts from the same weights on the same batch, so configs that keep the numerics
      // measure the same loss: the CSV keeps it, people see the guard's verdict on those that change it.
      {"loss", "Loss", K::kLoss, kInCsv, [](R, T t) -> CellValue { return t.metrics.loss; }},
      {"guard", "Convergence guard", K::kText, kInAll, [](R, T t) -> CellValue { return format_guard(t); }},
      {"error", "Error", K::kText, kInCsv | kInMarkdown, [](R, T t) -> CellValue { return t.record.error; }},
      {"config_json", "Config JSON", K::kText, kInCsv, [](R, T t) -> CellValue { return t.record.config_json; }},
      {"bound_s", "Bound", K::kSeconds, kInAll, [](R, T t) -> CellValue { return t.bound_s; }},
      {"efficiency", "Efficiency", K::kFraction, kInAll, [](R, T t) -> CellValue { return t.efficiency; }},
      // The session's kind, and where an online session's window ran among the job's steps (the
      // human formats show these in their windows table).
      {"session_kind", "Session kind", K::kText, kInCsv,
       [](R r, T) -> CellValue { return std::string(to_string(r.session.kind)); }},
      {"window_first_step", "First step", K::kCount, kInCsv,
       [](R, T t) -> CellValue { return t.window ? count(t.window->first_step) : std::nullopt; }},
      {"window_last_step", "Last step", K::kCount, kInCsv,
       [](R, T t) -> CellValue { return t.window ? count(t.window->last_step) : std::nullopt; }},
      {"window_discarded_steps", "Discarded", K::kCount, kInCsv,
       [](R, T t) -> CellValue { return t.window ? count(t.window->discarded) : std::nullopt; }},
      {"window_ran", "Ran", K::kText, kInCsv, [](R, T t) -> CellValue { return t.window ? t.window->ran : ""; }},
      {"window_phase", "Phase", K::kText, kInCsv, [](R, T t) -> CellValue { return t.window ? t.window->phase : ""; }},
      {"window_pair", "Pair", K::kCount, kInCsv,
       [](R, T t) -> CellValue { return t.window && t.window->pair ? count(*t.window->pair) : std::nullopt; }},
      {"window_used", "Used", K::kText, kInCsv,
       [](R, T t) -> CellValue { return t.window ? std::string(t.window->used ? "true" : "false") : ""; }},
  };
  return columns;
}

// The human formats' column order: the trial, what it ran, its times, where they went, its
// verdicts; the CSV keeps the order its columns were added in.
constexpr std::string_view kHumanOrder[] = {
    "ordinal",        "role",   "config",     "steps",         "step_p50_s", "step_p90_s", "step_p95_s",
    "samples_per_s_per_device", "speedup_vs_baseline_x", "compute_s", "comm_s", "exposed_comm_s", "bound_s",
    "efficiency",     "compression_s", "guard", "status",     "error"};

std::vector<const TrialColumn*> human_columns(ColumnFormat format) {
  std::vector<const TrialColumn*> shown;
  for (std::string_view name : kHumanOrder) {
    for (const auto& column : trial_columns()) {
      if (column.name == name && column.in(format)) shown.push_back(&column);
    }
  }
  return shown;
}

std::vector<const TrialColumn*> shown_columns(ColumnFormat format, const Report& report) {
  std::vector<const TrialColumn*> shown;
  for (const auto* column : human_columns(format)) {
    const bool any = std::any_of(report.trials.begin(), report.trials.end(), [&](const TrialSummary& t) {
      return human_cell(*column, report, t) != "-";
    });
    if (any || report.trials.empty()) shown.push_back(column);
  }
  return shown;
}

bool TrialColumn::numeric() const {
  return kind != ColumnKind::kText && kind != ColumnKind::kConfig && kind != ColumnKind::kStatus;
}

std::string TrialColumn::human_title() const {
  switch (kind) {
    case ColumnKind::kSeconds: return fmt::format("{} (ms)", title);
    case ColumnKind::kMib: return fmt::format("{} (MiB)", title);
    default: return std::string(title);
  }
}

std::string csv_cell(const TrialColumn& column, const Report& r, const TrialSummary& t) {
  const CellValue value = column.value(r, t);
  if (!column.numeric()) return text_of(value);
  const Number n = number_of(value);
  if (!n) return "";
  if (column.kind == ColumnKind::kCount) return fmt::format("{}", static_cast<int64_t>(*n));
  return fmt::format("{:.9g}", *n);
}

std::string human_cell(const TrialColumn& column, const Report& r, const TrialSummary& t) {
  const CellValue value = column.value(r, t);
  switch (column.kind) {
    case ColumnKind::kCount: {
      const Number n = number_of(value);
      return n ? fmt::format("{}", static_cast<int64_t>(*n)) : "-";
    }
    case ColumnKind::kSeconds: return format_ms(number_of(value));
    case ColumnKind::kMib: {
      const Number n = number_of(value);
      return n ? fmt::format("{:g}", *n) : "-";
    }
    case ColumnKind::kRate: return format_rate(number_of(value));
    case ColumnKind::kRatio: return format_ratio(number_of(value));
    case ColumnKind::kSpeedup:  // DDP's defaults are the baseline itself: no speedup over themselves
      return t.is_baseline ? std::string(to_string(TrialRole::kBaseline)) : format_ratio(number_of(value));
    case ColumnKind::kFraction: return format_percent(number_of(value));
    case ColumnKind::kLoss: return format_loss(t);
    case ColumnKind::kText:
    case ColumnKind::kConfig:
    case ColumnKind::kStatus: {
      std::string text = text_of(value);
      return text.empty() ? "-" : text;
    }
  }
  return "-";
}

}  // namespace acspeed::report
