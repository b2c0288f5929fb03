// The JSON report ("acspeed-report", version kJsonFormatVersion), documented field by field in
// docs/report-format.md. Times are seconds, rates per second, missing values null.
#include <nlohmann/json.hpp>

#include "acspeed/tuner/effective_speedup.h"
#include "render.h"

namespace acspeed::report {
namespace {

using json = nlohmann::json;

// A value, or null.
template <typename T>
json optional_object(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

// A stored JSON column as JSON; text that does not parse is kept as a string.
json column(const std::string& text) {
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return value.is_discarded() ? json(text) : value;
}

}  // namespace

void to_json(json& j, const StepStats& s) {
  j = {{"count", s.count}, {"min", s.min}, {"p25", s.p25}, {"p50", s.p50}, {"p75", s.p75},
       {"p90", s.p90},     {"p95", s.p95}, {"max", s.max}, {"mean", s.mean}};
}

void to_json(json& j, const PooledTimes& p) {
  j = {{"label", p.label},
       {"config", optional_object(p.config)},
       {"source", p.source},
       {"trial_ids", p.trial_ids},
       {"step_time_s", p.stats},
       {"samples_per_s", optional_object(p.samples_per_s)}};
}

void to_json(json& j, const RepeatPair& p) {
  j = {{"candidate_trial", p.candidate_trial},
       {"baseline_trial", p.baseline_trial},
       {"candidate_ordinal", p.candidate_ordinal},
       {"baseline_ordinal", p.baseline_ordinal},
       {"candidate_p50_s", p.candidate_p50_s},
       {"baseline_p50_s", p.baseline_p50_s},
       {"speedup", p.speedup}};
}

void to_json(json& j, const OnlineWindow& w) {
  j = {{"first_step", w.first_step}, {"last_step", w.last_step},         {"steps", w.steps},
       {"discarded", w.discarded},   {"ran", w.ran},                     {"phase", w.phase},
       {"pair", optional_object(w.pair)}, {"used", w.used}};
}

namespace {

std::optional<double> per_device(std::optional<double> rate, int64_t world_size) {
  if (!rate || world_size <= 0) return std::nullopt;
  return *rate / static_cast<double>(world_size);
}

json trial_json(const TrialSummary& t, int64_t world_size) {
  const auto& r = t.record;
  return {{"id", r.id},
          {"ordinal", r.ordinal},
          {"role", to_string(r.role)},
          {"status", to_string(r.status)},
          {"error", r.error.empty() ? json(nullptr) : json(r.error)},
          {"config", t.config ? json(*t.config) : column(r.config_json)},
          {"config_text", t.config_text},
          {"started_at", r.started_at},
          {"finished_at", r.finished_at},
          {"step_times_s", r.step_times_s},
          {"step_time_s", optional_object(t.stats)},
          {"samples_per_s", optional_object(t.samples_per_s)},
          {"samples_per_s_per_device", optional_object(per_device(t.samples_per_s, world_size))},
          {"speedup_vs_baseline", optional_object(t.speedup_vs_baseline)},
          {"compute_s", optional_object(t.metrics.compute_s)},
          {"comm_s", optional_object(t.metrics.comm_s)},
          {"exposed_comm_s", optional_object(t.metrics.exposed_comm_s)},
          {"loss", optional_object(t.metrics.loss)},
          {"bound_s", optional_object(t.bound_s)},
          {"predicted_s", optional_object(t.predicted_s)},
          {"efficiency", optional_object(t.efficiency)},
          {"compression_s", optional_object(t.metrics.compression_s)},
          {"guard", t.metrics.guard},
          {"inflation", t.metrics.inflation ? nlohmann::json(*t.metrics.inflation) : nlohmann::json(nullptr)},
          {"effective_speedup_vs_baseline", optional_object(effective_speedup_vs_baseline(t))},
          {"window", optional_object(t.window)},
          {"metrics", column(r.metrics_json)}};
}

// Step speedup, inflation and effective speedup side by side (tuner/include/acspeed/tuner/effective_speedup.h); null for
// a decision stored without them.
json speedups_json(const Decision& d) {
  const auto speedups = tuner::speedups_of_evidence(d.evidence_json);
  return speedups ? json(*speedups) : json(nullptr);
}

json decision_json(const Report& r) {
  if (!r.decision) return nullptr;
  const auto& d = *r.decision;
  return {{"id", d.id},
          {"active", d.active},
          {"config", d.config},
          {"config_text", d.config.describe()},
          {"keeps_ddp_defaults", d.config.is_default()},
          {"speedup", optional_object(d.speedup)},
          {"ci_low", optional_object(d.ci_low)},
          {"ci_high", optional_object(d.ci_high)},
          {"ci_level", 0.95},
          {"speedups", speedups_json(d)},
          {"repeats", r.pairs},
          {"evidence", column(d.evidence_json)},
          {"note", d.note},
          {"torch_version", d.torch_version},
          {"nccl_version", d.nccl_version},
          {"cuda_version", d.cuda_version},
          {"batch_size_per_device", d.batch_size},
          {"created_at", d.created_at}};
}

// The step model's calibration (tuner/include/acspeed/tuner/step_model.h), or why there is none.
json model_json(const Report& r) {
  const auto& m = r.model;
  const tuner::LinkFit* defaults = tuner::link_fit_for(m, CommConfig{});  // DDP's defaults' flow count
  json links = json::array();
  for (const auto& [flows, link] : m.links) {
    links.push_back({{"flows", flows}, {"bytes_per_s", link.pooled.bytes_per_s}, {"latency_s", link.pooled.latency_s}});
  }
  json j = {{"compute_s", optional_object(m.compute_s)},
            {"serial_s", optional_object(m.serial_s)},
            {"payload_bytes", optional_object(m.payload_bytes)},
            {"bytes_per_s", defaults ? json(defaults->bytes_per_s) : json(nullptr)},
            {"latency_s", defaults ? json(defaults->latency_s) : json(nullptr)},
            {"links", links},
            {"not_predicted", r.model_note.empty() ? json(nullptr) : json(r.model_note)}};
  return j;
}

// An online session's job: its warm-up and where exploration ended (the windows are the trials').
json online_json(const Report& r) {
  if (r.session.kind != SessionKind::kOnline) return nullptr;
  return {{"warmup_steps", optional_object(r.warmup_steps)},
          {"decision_from_step", optional_object(r.decision_from_step)}};
}

}  // namespace

std::string render_json(const Report& r, const RenderOptions& options) {
  const auto& s = r.session;
  json trials = json::array();
  for (const auto& t : r.trials) trials.push_back(trial_json(t, s.world_size));
  const json document = {
      {"format", kJsonFormatName},
      {"version", kJsonFormatVersion},
      {"command_line", options.command_line},
      {"session",
       {{"id", s.id},
        {"instance_type", s.instance_type},
        {"model_name", s.model_name},
        {"model_signature", s.model_signature},
        {"precision", s.precision},
        {"world_size", s.world_size},
        {"nnodes", s.nnodes},
        {"batch_size_per_device", s.batch_size},
        {"strategy", s.strategy},
        {"seed", s.seed},
        {"status", to_string(s.status)},
        {"kind", to_string(s.kind)},
        {"started_at", s.started_at},
        {"finished_at", s.finished_at.empty() ? json(nullptr) : json(s.finished_at)},
        {"search_space", column(s.search_space_json)},
        {"options", column(s.options_json)},
        {"versions", column(s.versions_json)}}},
      {"baseline", optional_object(r.baseline)},
      {"best", optional_object(r.best)},
      {"trials", trials},
      {"decision", decision_json(r)},
      {"model", model_json(r)},
      {"online", online_json(r)},
  };
  // Replace invalid UTF-8 from the store instead of failing the whole report.
  return document.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace acspeed::report
