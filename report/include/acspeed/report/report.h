// Tuning reports: one tuning session from the store, summarised for people (Markdown, HTML with
// plots) and for programs (JSON, CSV).
//
// build_report() gathers a session, its trials, its decision and the baseline, and computes from
// the raw step times what it can (p25/p50/p75/p90/p95, samples/s, speedup vs the baseline, the
// alternated candidate/baseline pairs), so a report never depends on optional probe metrics;
// metrics the trial worker recorded (compute_s, comm_s, exposed_comm_s, loss) are shown when
// present and as "-" (JSON null, CSV empty) when not. render_report() writes one of four formats
// (one file each in report/src); the JSON and CSV layouts are documented in docs/report-format.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "acspeed/config.h"
#include "acspeed/job_versions.h"
#include "acspeed/store.h"
#include "acspeed/tuner/step_model.h"
#include "acspeed/tuner/trial_metrics.h"

namespace acspeed::report {

inline constexpr const char* kJsonFormatName = "acspeed-report";
inline constexpr int kJsonFormatVersion = 1;

enum class Format { kMarkdown, kJson, kCsv, kHtml };
// "md", "json", "csv", "html"; anything else throws InvalidArgument naming the value and these.
Format parse_format(std::string_view text);
const std::vector<std::string>& format_names();
std::string_view to_string(Format format);

// Step-time statistics of one set of raw step times, in seconds (percentiles: tuner::percentile,
// linear interpolation between order statistics).
struct StepStats {
  size_t count = 0;
  double min = 0, p25 = 0, p50 = 0, p75 = 0, p90 = 0, p95 = 0, max = 0, mean = 0;
};
// nullopt for an empty vector.
std::optional<StepStats> step_stats(const std::vector<double>& times_s);

// Where a window of an online session (docs/online.md) ran among the job's steps, as its trial's
// metrics recorded it ("online_window", tuner/include/acspeed/tuner/online.h). Steps count from 0,
// the job's first synchronised backward.
struct OnlineWindow {
  int64_t first_step = 0;
  int64_t last_step = 0;   // first_step + steps - 1
  int64_t steps = 0;       // steps it ran: discarded + measured
  int64_t discarded = 0;   // its first steps, disturbed by a switch: run, not measured
  std::string ran;         // "baseline" (the job's own DDP) | "candidate"
  std::string phase;       // "search" | "decision"
  std::optional<int64_t> pair;  // the pair it belongs to; nullopt: none
  bool used = false;       // its times entered a cost or the verdict
};

struct TrialSummary {
  TrialRecord record;
  std::optional<CommConfig> config;  // nullopt when config_json is not a valid config
  std::string config_text;           // CommConfig::describe(), or "invalid config: ..." for a bad one
  std::optional<StepStats> stats;    // from record.step_times_s; nullopt when there are none
  std::optional<double> samples_per_s;        // whole job: batch per device x world size / p50
  // The trial runs DDP's defaults: it is a measurement of the baseline, with no speedup over it.
  bool is_baseline = false;
  std::optional<double> speedup_vs_baseline;  // baseline p50 / this trial's p50; nullopt for a baseline trial
  // From metrics_json (acspeed/tuner/trial_metrics.h; per-step seconds): the probe breakdown, the
  // loss and whether it stayed finite, the decision pair; defaults where the trial has none (or
  // metrics that do not read as that schema: the report then rests on the raw step times).
  tuner::TrialMetrics metrics;
  // The session's step model (tuner/include/acspeed/tuner/step_model.h) for this trial's config; efficiency = bound / p50.
  std::optional<double> bound_s, predicted_s, efficiency;
  // The window this trial is, in an online session; nullopt for an offline trial (or one whose
  // metrics do not say where it ran).
  std::optional<OnlineWindow> window;
};

// A set of step times pooled from several trials (the baseline, or the best configuration).
struct PooledTimes {
  std::string label;             // "DDP defaults", or the config's describe()
  std::optional<CommConfig> config;  // the trials' config
  std::string source;            // which trials: "baseline trials", "search trials with this config"...
  std::vector<int64_t> trial_ids;
  std::vector<double> times_s;   // concatenated raw step times
  StepStats stats;
  std::optional<double> samples_per_s;
};

// One alternated (candidate, baseline) repeat: speedup = baseline p50 / candidate p50. Trials are
// paired by the "pair" index the tuner records in their metrics, else by their order.
struct RepeatPair {
  int64_t candidate_trial = 0;  // trial ids (the store's)
  int64_t baseline_trial = 0;
  int64_t candidate_ordinal = 0;  // trial numbers in the session, as the human formats show them
  int64_t baseline_ordinal = 0;
  double candidate_p50_s = 0;
  double baseline_p50_s = 0;
  double speedup = 0;
};

struct Report {
  SessionRecord session;
  std::vector<TrialSummary> trials;                // in the session's order
  std::optional<Decision> decision;                // the session's decision (active one first, else latest)
  std::optional<PooledTimes> baseline;             // DDP defaults as measured in this session
  std::optional<PooledTimes> best;                 // the winner (or best candidate) as measured
  std::vector<RepeatPair> pairs;                   // alternated repeats of the decision
  std::vector<std::string> probes;                 // probes that measured the breakdown, sorted
  tuner::StepModel model;                          // calibrated from the session's trials
  std::string model_note;                          // why there is no bound ("" when there is one)
  // An online session's job: the warm-up steps before window 0 (untimed, the job's own DDP) and the
  // step the decision runs from (the window that ran while the verdict was reached is not measured,
  // so it can lie past the last window's end); nullopt when the session is offline or did not record
  // them.
  std::optional<int64_t> warmup_steps, decision_from_step;
  // Flattened "a.b" -> text views of the session's JSON columns, for the human formats (arrays of
  // objects or of more than a dozen values are summarised; the JSON report has them whole).
  std::vector<std::pair<std::string, std::string>> versions, search_space, options;
};

// The versions a decision was tuned under, as every command shows them (job_versions.h): those it
// records (what the lookup compares), with what torch bundled from its session's versions
// (`session_versions_json`; "" when the session is gone).
JobVersions tuned_versions(const Decision& decision, const std::string& session_versions_json);

// Reads session `session_id` from `store` and computes the report. Throws InvalidArgument when the
// store has no such session.
Report build_report(const Store& store, int64_t session_id);

struct RenderOptions {
  Format format = Format::kMarkdown;
  // The command line that produced the report, recorded in JSON and shown in Markdown/HTML.
  std::vector<std::string> command_line;
};

std::string render_report(const Report& report, const RenderOptions& options);

}  // namespace acspeed::report
