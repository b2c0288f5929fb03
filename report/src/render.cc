#include "render.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "acspeed/error.h"
#include "acspeed/strings.h"
#include "acspeed/tuner/effective_speedup.h"

namespace acspeed::report {

const std::vector<std::string>& format_names() {
  static const std::vector<std::string> names = {"md", "json", "csv", "html"};
  return names;
}

Format parse_format(std::string_view text) {
  static const Format formats[] = {Format::kMarkdown, Format::kJson, Format::kCsv, Format::kHtml};
  for (size_t i = 0; i < format_names().size(); ++i) {
    if (text == format_names()[i]) return formats[i];
  }
  ACS_THROW(InvalidArgument, "unknown report format '{}' (accepted: {})", text, join(format_names()));
}

std::string_view to_string(Format format) {
  switch (format) {
    case Format::kMarkdown: return "md";
    case Format::kJson: return "json";
    case Format::kCsv: return "csv";
    case Format::kHtml: return "html";
  }
  return "?";
}

std::string render_report(const Report& report, const RenderOptions& options) {
  switch (options.format) {
    case Format::kMarkdown: return render_markdown(report, options);
    case Format::kJson: return render_json(report, options);
    case Format::kCsv: return render_csv(report);
    case Format::kHtml: return render_html(report, options);
  }
  ACS_THROW(Error, "unhandled report format {}", static_cast<int>(options.format));
}

std::string format_ms(std::optional<double> seconds) {
  return seconds ? fmt::format("{:.2f}", *seconds * 1e3) : "-";
}

std::string format_rate(std::optional<double> per_second) {
  return per_second ? fmt::format("{:.1f}", *per_second) : "-";
}

std::string format_ratio(std::optional<double> ratio) {
  return ratio ? fmt::format("{:.3f}x", *ratio) : "-";
}

std::string format_percent(std::optional<double> fraction) {
  return fraction ? fmt::format("{:.0f}%", *fraction * 100) : "-";
}

std::string format_loss(const TrialSummary& trial) {
  if (trial.metrics.finite == false) return "NaN/Inf";
  return trial.metrics.loss ? fmt::format("{:.4g}", *trial.metrics.loss) : "-";
}

std::string format_guard(const TrialSummary& trial) {
  const auto& g = trial.metrics.guard;
  if (!g.is_object() || !g.contains("passed")) return "-";
  std::vector<std::string> parts;
  const auto number = [](const nlohmann::json& j, const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_number() ? std::optional<double>(j[key].get<double>())
                                                                   : std::nullopt;
  };
  if (g.contains("fidelity")) {
    if (auto cosine = number(g["fidelity"], "cosine")) {
      std::string window = fmt::format("cos {:.3f}, norm err {:.3f}", *cosine,
                                       number(g["fidelity"], "norm_error").value_or(0));
      if (auto from = number(g["fidelity"], "from_trial")) window += fmt::format(" (window of trial {:g})", *from);
      parts.push_back(window);
    }
  }
  if (g.contains("loss")) {
    if (auto excess = number(g["loss"], "excess")) {
      parts.push_back(fmt::format("loss {:+.4g}, allowed {:.4g}{}", *excess, number(g["loss"], "allowed").value_or(0),
                                  g["loss"].contains("overruled")
                                      ? " (overruled: " + g["loss"].value("overruled", std::string()) + ")"
                                      : std::string()));
    }
  }
  if (trial.metrics.inflation) parts.push_back(fmt::format("inflation {}", trial.metrics.inflation->describe()));
  // An undecided verdict's longer trajectories (tuner/src/guard.h): how long, and why.
  if (const auto& e = g.value("extended", nlohmann::json()); e.is_object()) {
    parts.push_back(e.contains("declined")
                        ? fmt::format("not extended past {} steps ({}): {}", e.value("to_steps", 0),
                                      e.value("declined", std::string()), e.value("why", std::string()))
                        : fmt::format("trajectories extended from {} to {} steps: {}", e.value("from_steps", 0),
                                      e.value("to_steps", 0), e.value("why", std::string())));
  }
  if (g.contains("undecided")) parts.push_back("undecided: " + g.value("undecided", std::string()));
  return fmt::format("{} ({})", guard_verdict(g), fmt::join(parts, "; "));
}

const char* guard_verdict(const nlohmann::json& guard) {
  if (!guard.is_object()) return "-";
  if (guard.value("passed", false)) return "pass";
  return guard.contains("undecided") ? "undecided" : "fail";  // undecided: neither a pass nor a rejection
}

std::optional<double> effective_speedup_vs_baseline(const TrialSummary& trial) {
  if (!trial.speedup_vs_baseline) return std::nullopt;
  if (!trial.metrics.inflation) return trial.speedup_vs_baseline;  // changes no numerics: inflation 1
  const auto& i = *trial.metrics.inflation;
  if (i.kind != tuner::InflationKind::kMeasured) return std::nullopt;
  return *trial.speedup_vs_baseline / i.estimate;
}

std::vector<std::string> decision_facts(const Report& r) {
  if (!r.decision) return {};
  const auto& d = *r.decision;
  std::vector<std::string> facts;
  const std::string interval =
      d.ci_low && d.ci_high ? fmt::format(", 95% confidence interval [{:.3f}, {:.3f}] over {} alternated repeat(s)",
                                          *d.ci_low, *d.ci_high, r.pairs.size())
                            : "";
  if (!d.config.is_default() && d.speedup) {
    facts.push_back(fmt::format("Speedup over DDP defaults: {}{}{}", format_ratio(d.speedup), interval,
                                d.ci_low ? (*d.ci_low > 1.0 ? ": the interval excludes 1" : ": the interval includes 1")
                                         : ""));
  } else if (d.speedup) {
    facts.push_back(fmt::format("DDP defaults are kept: the best candidate ({}) measured {} over them{}{}",
                                r.best ? r.best->label : "?", format_ratio(d.speedup), interval,
                                d.ci_low && *d.ci_low <= 1.0 ? ", an interval that includes 1" : ""));
  } else if (d.config.is_default()) {
    facts.emplace_back("DDP defaults are kept: no other configuration was faster in the search");
  } else {
    facts.emplace_back("Speedup over DDP defaults: -");
  }
  facts.push_back(fmt::format("Tuned under: {}; per-device batch {}",
                              describe(tuned_versions(d, r.session.versions_json)), d.batch_size));
  facts.push_back(fmt::format("Created (UTC): {}", d.created_at));
  if (const auto speedups = tuner::speedups_of_evidence(d.evidence_json)) {
    facts.push_back(fmt::format("Step speedup, inflation and effective speedup (step speedup / inflation; the "
                                "decision rests on the effective one): {}",
                                speedups->describe()));
  }
  const auto evidence = nlohmann::json::parse(d.evidence_json, nullptr, false);
  if (evidence.is_object()) {
    const auto text = [&evidence](const char* key) {
      return evidence.contains(key) && evidence[key].is_string() ? evidence[key].get<std::string>() : std::string();
    };
    const auto& search = evidence.contains("search") ? evidence["search"] : nlohmann::json();
    if (search.is_object() && search.contains("measured") && search.contains("best_p50_s")) {
      facts.push_back(fmt::format("Search: the {} strategy measured {} configuration(s); the fastest p50 step was {} ms",
                                  search.value("strategy", std::string("?")), search["measured"].get<int64_t>(),
                                  format_ms(search["best_p50_s"].get<double>())));
    }
    if (const std::string method = text("method"); !method.empty()) {
      std::vector<std::string> speedups;
      if (evidence.contains("pair_speedups") && evidence["pair_speedups"].is_array()) {
        for (const auto& v : evidence["pair_speedups"]) speedups.push_back(fmt::format("{:.3f}", v.get<double>()));
      }
      facts.push_back(fmt::format("Method: {}, seed {}{}", method, evidence.value("seed", int64_t{0}),
                                  speedups.empty() ? "" : fmt::format("; the pairs' speedups: {}", join(speedups))));
    }
    if (evidence.contains("model") && evidence["model"].is_object() && evidence["model"].contains("bound_s")) {
      const auto& m = evidence["model"];
      facts.push_back(fmt::format("Step model: bound {} ms{}", format_ms(m["bound_s"].get<double>()),
                                  m.contains("efficiency")
                                      ? fmt::format(", efficiency {}", format_percent(m["efficiency"].get<double>()))
                                      : ""));
    }
    if (const std::string data = text("data"); !data.empty()) {
      facts.push_back(fmt::format("Convergence guard's trajectories trained on: {}", data));
    }
  }
  if (!d.note.empty()) facts.push_back(fmt::format("Note: {}", d.note));
  return facts;
}

std::string trials_preamble(const Report& r) {
  std::string out = r.baseline ? fmt::format("Baseline (DDP defaults): p50 {} ms over {} steps from {}. ",
                                             format_ms(r.baseline->stats.p50), r.baseline->stats.count, r.baseline->source)
                               : "No baseline measured in this session: speedups are not available. ";
  out += fmt::format("Step time = max over ranks per step; samples/s per device = {} / p50 step time (x {} devices "
                     "for the whole job). A trial that runs DDP's defaults is a baseline measurement: no speedup over "
                     "itself. ",
                     r.session.batch_size, r.session.world_size);
  out += r.probes.empty() ? "No probe breakdown (compute / communication) was recorded."
                          : fmt::format("Compute / comm / exposed comm: per-step medians from the {} probe.",
                                        join(r.probes));
  out += r.model_note.empty()
             ? " Bound = max(compute-only step, forward + optimizer + the wire time of the bytes the config sends "
               "at the fitted bandwidth); efficiency = bound / p50 (the step model, `acspeed-tune predict`)."
             : fmt::format(" No bound: {}.", r.model_note);
  return out;
}

std::string session_kind_text(const SessionRecord& session) {
  return session.kind == SessionKind::kOnline ? "online (tuned inside the training job)" : "offline (acspeed-tune)";
}

std::string windows_preamble(const Report& r) {
  size_t windows = 0;
  for (const auto& t : r.trials) windows += t.window ? 1 : 0;
  if (windows == 0) return "No window of this session recorded where it ran among the job's steps.";
  std::string out = "Online tuning ran inside the training job; steps count from 0, the job's first synchronised "
                    "backward. ";
  if (r.warmup_steps) {
    out += *r.warmup_steps > 0 ? fmt::format("Steps 0-{} warmed up on the job's own DDP, untimed. ", *r.warmup_steps - 1)
                               : "No warm-up steps. ";
  }
  out += fmt::format("Then {} window(s) alternated the job's own DDP (\"baseline\") with candidates in pairs; a "
                     "window's first steps after a switch ran but were not measured (\"discarded\"). ",
                     windows);
  if (r.decision_from_step) {
    out += fmt::format("The decision runs from step {} (a window that ran while the verdict was reached is not "
                       "measured). ",
                       *r.decision_from_step);
  }
  return out + "Step times are the maximum over ranks.";
}

TextTable windows_table(const Report& r) {
  TextTable table;
  table.header = {"Window", "First step", "Last step", "Discarded", "Ran", "Phase", "Pair", "Used", "Config",
                  "Measured steps", "p50 (ms)", "Min (ms)", "Max (ms)"};
  table.numeric = {true, true, true, true, false, false, true, false, false, true, true, true, true};
  for (const auto& t : r.trials) {
    if (!t.window) continue;
    const auto& w = *t.window;
    const auto stat = [&t](double StepStats::*field) {
      return format_ms(t.stats ? std::optional((*t.stats).*field) : std::nullopt);
    };
    table.rows.push_back({std::to_string(t.record.ordinal), std::to_string(w.first_step), std::to_string(w.last_step),
                          std::to_string(w.discarded), w.ran.empty() ? "-" : w.ran, w.phase.empty() ? "-" : w.phase,
                          w.pair ? std::to_string(*w.pair) : "-", w.used ? "yes" : "no", t.config_text,
                          std::to_string(t.record.step_times_s.size()), stat(&StepStats::p50),
                          stat(&StepStats::min), stat(&StepStats::max)});
  }
  return table;
}

}  // namespace acspeed::report
