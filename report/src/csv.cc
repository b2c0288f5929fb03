// The CSV report: one row per trial, units in the header, RFC 4180 (CRLF line ends, fields quoted
// by csv_field). Missing values are empty fields. Columns are documented in docs/report-format.md.
#include <fmt/format.h>

#include "render.h"

namespace acspeed::report {
namespace {

std::string number(std::optional<double> value) { return value ? fmt::format("{:.9g}", *value) : ""; }

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
  std::string out = row({"session_id", "trial_id", "ordinal", "role", "status", "config", "bucket_cap_mb",
                         "first_bucket_mb", "gradient_as_bucket_view", "algorithm", "streams", "compression",
                         "steps", "step_p50_s", "step_p90_s", "step_p95_s", "step_mean_s", "samples_per_s", "samples_per_s_per_device",
                         "speedup_vs_baseline_x", "inflation_x", "effective_speedup_x", "compute_s", "comm_s", "exposed_comm_s", "compression_s", "loss", "guard", "error",
                         "config_json", "bound_s", "efficiency"});
  for (const auto& t : r.trials) {
    const auto stat = [&t](double StepStats::*field) {
      return t.stats ? std::optional<double>((*t.stats).*field) : std::nullopt;
    };
    const auto& c = t.config;
    out += row({std::to_string(r.session.id), std::to_string(t.record.id), std::to_string(t.record.ordinal), t.record.role,
         t.record.status, t.config_text, number(c ? c->bucket_cap_mb : std::nullopt),
         number(c ? c->first_bucket_mb : std::nullopt),
         c && c->gradient_as_bucket_view ? (*c->gradient_as_bucket_view ? "true" : "false") : "",
         c ? std::string(to_string(c->algorithm)) : "", c ? std::to_string(c->streams) : "",
         c ? std::string(to_string(c->compression)) : "", std::to_string(t.record.step_times_s.size()),
         number(stat(&StepStats::p50)), number(stat(&StepStats::p90)), number(stat(&StepStats::p95)),
         number(stat(&StepStats::mean)), number(t.samples_per_s),
         number(t.samples_per_s && r.session.world_size > 0
                    ? std::optional<double>(*t.samples_per_s / static_cast<double>(r.session.world_size))
                    : std::nullopt),
         number(t.speedup_vs_baseline),
         number(t.metrics.inflation && t.metrics.inflation->kind == tuner::InflationKind::kMeasured
                    ? std::optional<double>(t.metrics.inflation->estimate)
                    : std::nullopt),
         number(effective_speedup_vs_baseline(t)), number(t.metrics.compute_s),
         number(t.metrics.comm_s), number(t.metrics.exposed_comm_s), number(t.metrics.compression_s),
         number(t.metrics.loss), format_guard(t), t.record.error, t.record.config_json, number(t.bound_s), number(t.efficiency)});
  }
  return out;
}

}  // namespace acspeed::report
