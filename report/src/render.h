// What the four renderers share (private to report/): the renderers themselves, which
// render_report() dispatches to, and the formatting of values and sentences.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "acspeed/report/report.h"

namespace acspeed::report {

// The JSON report's objects (json.cc), for nlohmann::json (ADL).
void to_json(nlohmann::json& j, const StepStats& stats);
void to_json(nlohmann::json& j, const PooledTimes& pooled);
void to_json(nlohmann::json& j, const RepeatPair& pair);
void to_json(nlohmann::json& j, const OnlineWindow& window);

// The renderers (markdown.cc, json.cc, csv.cc, html.cc).
std::string render_markdown(const Report& report, const RenderOptions& options);
std::string render_json(const Report& report, const RenderOptions& options);
std::string render_csv(const Report& report);
std::string render_html(const Report& report, const RenderOptions& options);

// One CSV field quoted per RFC 4180: fields holding a comma, a double quote, CR or LF (or leading /
// trailing spaces) are wrapped in double quotes with inner quotes doubled; others pass unchanged.
std::string csv_field(std::string_view text);

// Formatting shared by the human formats: "-" for a missing value.
std::string format_ms(std::optional<double> seconds);        // "54.20"
std::string format_rate(std::optional<double> per_second);    // "597.3"
std::string format_ratio(std::optional<double> ratio);        // "1.23x"
std::string format_percent(std::optional<double> fraction);   // "83%"
std::string format_loss(const TrialSummary& trial);           // "6.9", "NaN/Inf" or "-"
// The convergence guard's verdict on a compressed trial: "pass (cos 0.998, norm err 0.004; loss +0.0044, allowed 0.0704)",
// "fail (...)", "undecided (...)", or "-" when it was not judged.
std::string format_guard(const TrialSummary& trial);
// Its verdict in one word: "pass", "fail", "undecided" (a loss check failed within its noise,
// awaiting longer trajectories: tuner/src/guard.h), or "-" when it was not judged.
const char* guard_verdict(const nlohmann::json& guard);
// The trial's speedup over the baseline divided by its step inflation (tuner/include/acspeed/tuner/inflation.h; 1 when it
// changes no numerics); nullopt without a speedup or with an infinite or unmeasurable inflation.
std::optional<double> effective_speedup_vs_baseline(const TrialSummary& trial);
// The decision and its evidence in sentences (its speedup and interval, what it was tuned under,
// the search's size, the interval's method, seed and pair speedups, the step model's bound, what the
// guard trained on, its note); empty without a decision.
std::vector<std::string> decision_facts(const Report& report);
// The sentence introducing the trials table: what the baseline is, how rates are computed.
std::string trials_preamble(const Report& report);

// The session's kind for people: "offline (acspeed-tune)", "online (tuned inside the training job)".
std::string session_kind_text(const SessionRecord& session);

// A table for people, the same in Markdown and HTML: its header, which columns are numbers (right
// aligned), and its rows of cells ("-" for a missing value).
struct TextTable {
  std::vector<std::string> header;
  std::vector<bool> numeric;
  std::vector<std::vector<std::string>> rows;
};
// An online session's windows over the job's steps: the sentence introducing them (the warm-up, the
// pairs, the discarded steps, where exploration ended), and one row per window (its ordinal, first
// and last step, discarded steps, what it ran, phase, pair, whether it was used, config, measured
// steps and their p50 / min / max). Empty rows for a session without windows.
std::string windows_preamble(const Report& report);
TextTable windows_table(const Report& report);

}  // namespace acspeed::report
