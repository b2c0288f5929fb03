#include "acspeed/report/report.h"

#include <algorithm>
#include <functional>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "acspeed/error.h"
#include "acspeed/strings.h"
#include "acspeed/tuner/statistics.h"
#include "acspeed/tuner/trial_metrics.h"

namespace acspeed::report {
namespace {

using json = nlohmann::json;

// Arrays of objects, and arrays whose text would be longer than this, are summarised in the human
// formats (the JSON report has them whole).
constexpr size_t kMaxInlineArrayChars = 240;

json parse_or_null(const std::string& text) {
  if (text.empty()) return nullptr;
  return json::parse(text, nullptr, /*allow_exceptions=*/false);
}

std::string scalar_text(const json& value) {
  if (value.is_string()) return value.get<std::string>().empty() ? "-" : value.get<std::string>();
  if (value.is_null()) return "-";
  if (value.is_number_float()) return fmt::format("{:g}", value.get<double>());
  return value.dump();
}

void flatten(const json& value, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) {
  if (value.is_object()) {
    for (const auto& [key, item] : value.items()) flatten(item, prefix.empty() ? key : prefix + "." + key, out);
    return;
  }
  if (value.is_array()) {
    const bool scalars = std::all_of(value.begin(), value.end(), [](const json& v) { return v.is_primitive(); });
    if (value.empty()) {
      out.emplace_back(prefix, "[]");
    } else if (!scalars) {
      out.emplace_back(prefix, fmt::format("[{} entries: see the JSON report]", value.size()));
    } else {
      std::vector<std::string> parts;
      for (const auto& item : value) parts.push_back(scalar_text(item));
      std::string text = join(parts);
      if (text.size() > kMaxInlineArrayChars) text = fmt::format("[{} values: see the JSON report]", value.size());
      out.emplace_back(prefix, text);
    }
    return;
  }
  out.emplace_back(prefix, scalar_text(value));
}

// Flattens a stored JSON column; text that is not JSON is shown as it is.
std::vector<std::pair<std::string, std::string>> flatten_column(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  const json value = parse_or_null(text);
  if (value.is_discarded()) {
    out.emplace_back("(unparsed)", text);
  } else if (!value.is_null()) {
    flatten(value, "", out);
  }
  return out;
}

std::optional<double> samples_per_s(const SessionRecord& session, double step_s) {
  if (session.batch_size <= 0 || session.world_size <= 0 || step_s <= 0) return std::nullopt;
  return static_cast<double>(session.batch_size * session.world_size) / step_s;
}

// The window an online session's trial recorded in its metrics ("online_window"); nullopt when the
// metrics hold none, or one without the fields a window has.
std::optional<OnlineWindow> window_of(const std::string& metrics_json) {
  const json metrics = parse_or_null(metrics_json);
  if (!metrics.is_object() || !metrics.contains("online_window")) return std::nullopt;
  const json& w = metrics["online_window"];
  if (!w.is_object()) return std::nullopt;
  const auto integer = [&w](const char* key) {
    return w.contains(key) && w[key].is_number_integer() ? std::optional(w[key].get<int64_t>()) : std::nullopt;
  };
  const auto first = integer("first_step"), steps = integer("steps");
  if (!first || !steps || *steps < 1) return std::nullopt;
  OnlineWindow window;
  window.first_step = *first;
  window.steps = *steps;
  window.last_step = *first + *steps - 1;
  window.discarded = integer("discarded").value_or(0);
  window.ran = w.value("role", std::string());
  window.phase = w.value("phase", std::string());
  if (const auto pair = integer("pair"); pair && *pair >= 0) window.pair = pair;
  window.used = w.value("used", false);
  return window;
}

// A step count an online session's options recorded ({"online": {"warmup_steps": 10, ...}}).
std::optional<int64_t> online_step_of(const std::string& options_json, const char* key) {
  const json options = parse_or_null(options_json);
  if (!options.is_object() || !options.contains("online") || !options["online"].is_object()) return std::nullopt;
  const json& online = options["online"];
  if (!online.contains(key) || !online[key].is_number_integer()) return std::nullopt;
  return online[key].get<int64_t>();
}

bool usable(const TrialSummary& t) { return t.record.status == TrialStatus::kOk && t.stats.has_value(); }

std::optional<PooledTimes> pool(const Report& report, const std::string& label, const std::string& source,
                                const std::vector<const TrialSummary*>& trials) {
  PooledTimes pooled;
  pooled.label = label;
  pooled.source = source;
  for (const auto* t : trials) {
    pooled.trial_ids.push_back(t->record.id);
    pooled.times_s.insert(pooled.times_s.end(), t->record.step_times_s.begin(), t->record.step_times_s.end());
    if (!pooled.config && t->config) pooled.config = t->config;
  }
  auto stats = step_stats(pooled.times_s);
  if (!stats) return std::nullopt;
  pooled.stats = *stats;
  pooled.samples_per_s = samples_per_s(report.session, stats->p50);
  return pooled;
}

std::vector<const TrialSummary*> select(const Report& report, const std::function<bool(const TrialSummary&)>& pred) {
  std::vector<const TrialSummary*> out;
  for (const auto& t : report.trials) {
    if (usable(t) && pred(t)) out.push_back(&t);
  }
  return out;
}

std::optional<PooledTimes> find_baseline(const Report& report) {
  auto trials = select(report, [](const TrialSummary& t) { return t.record.role == TrialRole::kBaseline; });
  if (!trials.empty()) return pool(report, "DDP defaults", "baseline trials (alternated with the candidate)", trials);
  // The step model's own trials run without communication or through acspeed's hook: not DDP's defaults.
  trials = select(report, [](const TrialSummary& t) {
    return t.config && t.config->is_default() && t.record.role != TrialRole::kCompute &&
           t.record.role != TrialRole::kCalibration;
  });
  return pool(report, "DDP defaults", "trials with DDP's default settings", trials);
}

// The configuration the session settled on: the decision's config when it changes something, else
// the candidate that was re-run against the baseline, else the fastest search trial.
std::optional<CommConfig> best_config(const Report& report) {
  if (report.decision && !report.decision->config.is_default()) return report.decision->config;
  for (const auto& t : report.trials) {
    if (t.record.role == TrialRole::kCandidate && t.config) return t.config;
  }
  const TrialSummary* fastest = nullptr;
  for (const auto& t : report.trials) {
    if (!usable(t) || !t.config || t.config->is_default() || t.record.role == TrialRole::kBaseline) continue;
    if (!fastest || t.stats->p50 < fastest->stats->p50) fastest = &t;
  }
  return fastest ? fastest->config : std::nullopt;
}

std::optional<PooledTimes> find_best(const Report& report) {
  const auto config = best_config(report);
  if (!config) return std::nullopt;
  auto same = [&config](const TrialSummary& t) { return t.config && *t.config == *config; };
  auto trials = select(report, [&](const TrialSummary& t) { return t.record.role == TrialRole::kCandidate && same(t); });
  if (!trials.empty()) return pool(report, config->describe(), "candidate trials (alternated with the baseline)", trials);
  trials = select(report, [&](const TrialSummary& t) {
    return t.record.role != TrialRole::kBaseline && t.record.role != TrialRole::kCompute &&
           t.record.role != TrialRole::kCalibration && same(t);
  });
  return pool(report, config->describe(), "search trials with this config", trials);
}

// Matches the decision phase's candidate and baseline trials by the "pair" index the tuner records
// in their metrics, else by their order among the trials of their role.
std::vector<RepeatPair> find_pairs(const Report& report) {
  std::map<int64_t, const TrialSummary*> candidates, baselines;
  for (const auto& t : report.trials) {
    auto* side = t.record.role == TrialRole::kCandidate ? &candidates : t.record.role == TrialRole::kBaseline ? &baselines : nullptr;
    // An online window the verdict did not use is not one of its pairs (stores written before the
    // wait windows hold a whole pair run while the verdict's last results were awaited).
    if (!side || (t.window && !t.window->used)) continue;
    const int64_t index = t.metrics.pair ? *t.metrics.pair : static_cast<int64_t>(side->size());
    side->emplace(index, &t);
  }
  std::vector<RepeatPair> pairs;
  for (const auto& [index, c] : candidates) {
    auto b = baselines.find(index);
    if (b == baselines.end() || !usable(*c) || !usable(*b->second)) continue;
    const auto& base = *b->second;
    pairs.push_back({c->record.id, base.record.id, c->record.ordinal, base.record.ordinal, c->stats->p50,
                     base.stats->p50, tuner::pair_speedup(c->record.step_times_s, base.record.step_times_s)});
  }
  return pairs;
}

}  // namespace

std::optional<StepStats> step_stats(const std::vector<double>& times_s) {
  if (times_s.empty()) return std::nullopt;
  StepStats s;
  s.count = times_s.size();
  s.min = *std::min_element(times_s.begin(), times_s.end());
  s.max = *std::max_element(times_s.begin(), times_s.end());
  s.mean = tuner::mean(times_s);
  s.p25 = tuner::percentile(times_s, 25);
  s.p50 = tuner::percentile(times_s, 50);
  s.p75 = tuner::percentile(times_s, 75);
  s.p90 = tuner::percentile(times_s, 90);
  s.p95 = tuner::percentile(times_s, 95);
  return s;
}

JobVersions tuned_versions(const Decision& d, const std::string& session_versions_json) {
  const JobVersions session = job_versions_from_json(parse_or_null(session_versions_json));
  return {d.torch_version, d.nccl_version, d.cuda_version, session.torch_nccl, session.torch_cuda};
}

Report build_report(const Store& store, int64_t session_id) {
  auto session = store.session(session_id);
  if (!session) ACS_THROW(InvalidArgument, "no tuning session {} in store {}", session_id, store.path());
  Report report;
  report.session = *session;

  for (auto& record : store.trials(session_id)) {
    TrialSummary t;
    try {
      t.config = config_from_json(record.config_json);
      t.config_text = t.config->describe();
    } catch (const InvalidArgument& e) {
      t.config_text = fmt::format("invalid config: {}", e.what());
    }
    t.stats = step_stats(record.step_times_s);
    try {
      t.metrics = tuner::metrics_from_json(record.metrics_json);
    } catch (const InvalidArgument&) {
      // Not a metrics object of this schema: no breakdown; the report rests on the raw step times
      // (the JSON report carries the column as it is).
    }
    if (report.session.kind == SessionKind::kOnline) {
      t.window = window_of(record.metrics_json);
    }
    if (t.stats) t.samples_per_s = samples_per_s(report.session, t.stats->p50);
    // The metric is per device; the report's rate is the whole job's.
    if (!t.samples_per_s && t.metrics.samples_per_s > 0 && report.session.world_size > 0) {
      t.samples_per_s = t.metrics.samples_per_s * static_cast<double>(report.session.world_size);
    }
    t.record = std::move(record);
    report.trials.push_back(std::move(t));
  }

  DecisionFilter filter;
  filter.instance_type = report.session.instance_type;
  for (auto& d : store.decisions(filter)) {
    if (d.session_id != session_id) continue;
    if (!report.decision || (d.active && !report.decision->active) ||
        (d.active == report.decision->active && d.id > report.decision->id)) {
      report.decision = std::move(d);
    }
  }

  for (const auto& t : report.trials) {
    const auto& probe = t.metrics.probe;
    if (!probe.empty() && std::find(report.probes.begin(), report.probes.end(), probe) == report.probes.end()) {
      report.probes.push_back(probe);
    }
  }
  std::sort(report.probes.begin(), report.probes.end());
  report.baseline = find_baseline(report);
  for (auto& t : report.trials) {
    t.is_baseline = t.config && t.config->is_default() && t.record.role != TrialRole::kCompute &&
                    t.record.role != TrialRole::kCalibration;
    if (report.baseline && !t.is_baseline && t.stats && t.stats->p50 > 0) {
      t.speedup_vs_baseline = report.baseline->stats.p50 / t.stats->p50;
    }
  }
  report.model = tuner::session_model(store, report.session);
  for (auto& t : report.trials) {
    if (!t.config || t.record.role == TrialRole::kCompute) continue;
    const tuner::Prediction p = tuner::predict(report.model, *t.config);
    if (!p.ok) {
      if (report.model_note.empty()) report.model_note = p.why_not;
      continue;
    }
    t.bound_s = p.bound_s;
    t.predicted_s = p.step_s;
    if (t.stats && t.stats->p50 > 0) t.efficiency = p.bound_s / t.stats->p50;
  }
  report.best = find_best(report);
  report.pairs = find_pairs(report);
  // The job's NCCL and CUDA as every command shows them (job_versions.h), what torch bundles folded in.
  const JobVersions job = job_versions_from_json(parse_or_null(report.session.versions_json));
  for (const auto& [key, value] : flatten_column(report.session.versions_json)) {
    if (key == "torch_nccl" || key == "torch_cuda") continue;
    report.versions.emplace_back(key, key == "nccl" ? nccl_text(job) : key == "cuda" ? cuda_text(job) : value);
  }
  if (report.session.kind == SessionKind::kOnline) {
    report.warmup_steps = online_step_of(report.session.options_json, "warmup_steps");
    report.decision_from_step = online_step_of(report.session.options_json, "decision_from_step");
  }
  report.search_space = flatten_column(report.session.search_space_json);
  report.options = flatten_column(report.session.options_json);
  return report;
}

}  // namespace acspeed::report
