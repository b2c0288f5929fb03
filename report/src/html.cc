// The HTML report: one self-contained page (inline CSS, inline SVG drawn here, no script, nothing
// fetched at view time) with the Markdown report's content, the decision and its evidence in words
// first, then the plots, the trials and the settings. The five plots: throughput against bucket
// size per algorithm/streams, the step-time distribution of the best configuration vs the
// baseline, the compute / exposed-communication breakdown per trial, each trial's steps against the
// step model's bound, and the loss trajectories the convergence guard compared; an online session's
// windows over the job's steps first, with their table. Every string that comes from the store goes
// through escape_markup().
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "acspeed/comm_methods.h"
#include "acspeed/strings.h"
#include "render.h"
#include "svg.h"
#include "trial_columns.h"
#include "acspeed/tuner/statistics.h"

namespace acspeed::report {
namespace {

// Okabe-Ito colours: distinguishable with the common colour-vision deficiencies.
const char* const kPalette[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#7F7F7F", "#000000"};
constexpr const char* kComputeColour = "#0072B2";
constexpr const char* kExposedColour = "#D55E00";
constexpr const char* kRestColour = "#C8C8C8";
constexpr const char* kOwnDdpColour = "#7F7F7F";  // an online session's windows of the job's own DDP

std::string e(std::string_view text) { return escape_markup(text); }

std::string note(std::string_view text) { return fmt::format("<p class=\"note\">{}</p>\n", e(text)); }

const char* colour(size_t i) { return kPalette[i % std::size(kPalette)]; }

// Pads [lo, hi] and returns round ticks covering it; the domain is [ticks.front(), ticks.back()].
std::vector<double> axis_ticks(double lo, double hi, bool from_zero) {
  if (from_zero) lo = 0;
  double pad = (hi - lo) * 0.08;
  if (pad <= 0) pad = std::max(std::abs(hi) * 0.05, 1e-9);
  if (!from_zero) lo -= pad;
  hi += pad;
  auto ticks = nice_ticks(lo, hi, 5);
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : pad;
  if (ticks.front() > lo) ticks.insert(ticks.begin(), ticks.front() - step);
  if (ticks.back() < hi) ticks.push_back(ticks.back() + step);
  return ticks;
}

// The whole job's rate as one device's (what the tuner and the benchmark line print).
double per_device(const Report& r, double job_rate) {
  return r.session.world_size > 0 ? job_rate / static_cast<double>(r.session.world_size) : job_rate;
}

std::string series_label(const CommConfig& c) {
  std::string label = fmt::format("{}, {} stream{}", to_string(c.algorithm), c.streams, c.streams == 1 ? "" : "s");
  if (changes_numerics(c)) label += fmt::format(", {}", to_string(c.compression));
  if (c.gradient_as_bucket_view.value_or(false)) label += ", grad-as-bucket-view";
  return label;
}

std::string throughput_chart(const Report& r) {
  struct Point {
    double bucket_mb;
    double rate;
    const TrialSummary* trial;
  };
  std::vector<const TrialSummary*> trials;
  for (const auto& t : r.trials) {
    if (t.record.role == TrialRole::kSearch && t.record.status == TrialStatus::kOk && t.config && t.samples_per_s) trials.push_back(&t);
  }
  if (trials.empty()) return note("No search trial with a measured throughput to plot.");
  std::map<std::string, std::vector<Point>> series;
  for (const auto* t : trials) {
    series[series_label(*t->config)].push_back(
        {t->config->bucket_cap_mb.value_or(kDdpDefaultBucketMb), per_device(r, *t->samples_per_s), t});
  }
  std::vector<double> buckets, rates;
  for (const auto& [label, points] : series) {
    for (const auto& p : points) {
      buckets.push_back(p.bucket_mb);
      rates.push_back(p.rate);
    }
  }
  const std::optional<double> baseline_rate =
      r.baseline && r.baseline->samples_per_s ? std::optional(per_device(r, *r.baseline->samples_per_s)) : std::nullopt;
  if (baseline_rate) rates.push_back(*baseline_rate);
  std::sort(buckets.begin(), buckets.end());
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());

  constexpr double kLeft = 80, kTop = 20, kPlotW = 560, kPlotH = 300, kLegendX = kLeft + kPlotW + 30;
  Svg svg(900, kTop + kPlotH + 60, "Throughput against bucket size");
  Scale x{buckets.front(), buckets.back(), kLeft + 20, kLeft + kPlotW - 20, buckets.front() > 0};
  if (buckets.size() == 1) x = Scale{buckets.front() / 2, buckets.front() * 2, kLeft, kLeft + kPlotW, true};
  const auto y_ticks = axis_ticks(*std::min_element(rates.begin(), rates.end()),
                                  *std::max_element(rates.begin(), rates.end()), false);
  const Scale y{y_ticks.front(), y_ticks.back(), kTop + kPlotH, kTop};

  for (double v : y_ticks) {
    svg.line(kLeft, y(v), kLeft + kPlotW, y(v), "#e4e4e4");
    svg.text(kLeft - 8, y(v) + 4, tick_label(v), {"end", 11});
  }
  for (double b : buckets) {
    svg.line(x(b), kTop, x(b), kTop + kPlotH, "#eeeeee");
    svg.text(x(b), kTop + kPlotH + 18, tick_label(b), {"middle", 11});
  }
  svg.line(kLeft, kTop + kPlotH, kLeft + kPlotW, kTop + kPlotH, "#555");
  svg.line(kLeft, kTop, kLeft, kTop + kPlotH, "#555");
  svg.text(kLeft + kPlotW / 2, kTop + kPlotH + 42,
           fmt::format("bucket_cap_mb (MiB{}; unset = DDP's {:g})", x.log ? ", log scale" : "", kDdpDefaultBucketMb),
           {"middle", 12});
  svg.text(18, kTop + kPlotH / 2, "samples/s per device (at p50 step time)", {"middle", 12, "#333", false, -90});

  if (baseline_rate) {
    svg.line(kLeft, y(*baseline_rate), kLeft + kPlotW, y(*baseline_rate), "#333", 1.5, true);
  }
  size_t index = 0;
  double legend_y = kTop + 10;
  for (const auto& [label, points] : series) {
    const char* c = colour(index++);
    std::map<double, std::vector<double>> by_bucket;
    for (const auto& p : points) by_bucket[p.bucket_mb].push_back(p.rate);
    std::vector<std::pair<double, double>> line;
    for (const auto& [bucket, values] : by_bucket) line.emplace_back(x(bucket), y(tuner::median(values)));
    if (line.size() > 1) svg.polyline(line, c, 2);
    for (const auto& p : points) {
      svg.circle(x(p.bucket_mb), y(p.rate), 4.5, c, 0.9,
                 fmt::format("trial {}: {}: {:.1f} samples/s per device, p50 {} ms", p.trial->record.ordinal,
                             p.trial->config_text, p.rate, format_ms(p.trial->stats->p50)));
    }
    svg.rect(kLegendX, legend_y - 9, 14, 10, c);
    svg.text(kLegendX + 20, legend_y, label, {"start", 12});
    legend_y += 20;
  }
  if (baseline_rate) {
    svg.line(kLegendX, legend_y - 4, kLegendX + 14, legend_y - 4, "#333", 1.5, true);
    svg.text(kLegendX + 20, legend_y, fmt::format("DDP defaults (baseline): {:.1f}/s", *baseline_rate), {"start", 12});
  }
  return svg.str();
}

std::string distribution_chart(const Report& r) {
  struct Row {
    std::string label;
    const PooledTimes* times;
    const char* colour;
  };
  std::vector<Row> rows;
  if (r.baseline) rows.push_back({"Baseline: DDP defaults", &*r.baseline, "#7F7F7F"});
  if (r.best) {
    const bool decided = r.decision && r.best->config && r.decision->config == *r.best->config;
    rows.push_back({fmt::format("{}: {}", decided ? "Stored decision" : "Best candidate (not accepted)", r.best->label),
                    &*r.best, "#0072B2"});
  }
  if (rows.empty()) return note("No step times for the baseline or a best configuration to compare.");
  double lo = rows.front().times->stats.min, hi = rows.front().times->stats.max;
  for (const auto& row : rows) {
    lo = std::min(lo, row.times->stats.min);
    hi = std::max(hi, row.times->stats.max);
  }
  const auto ticks = axis_ticks(lo * 1e3, hi * 1e3, false);
  constexpr double kLeft = 40, kTop = 10, kRowH = 96, kPlotW = 820;
  const double plot_h = kRowH * static_cast<double>(rows.size());
  Svg svg(900, kTop + plot_h + 50, "Step-time distribution: best configuration vs DDP defaults");
  const Scale x{ticks.front(), ticks.back(), kLeft, kLeft + kPlotW};
  for (double v : ticks) {
    svg.line(x(v), kTop, x(v), kTop + plot_h, "#eeeeee");
    svg.text(x(v), kTop + plot_h + 18, tick_label(v), {"middle", 11});
  }
  svg.line(kLeft, kTop + plot_h, kLeft + kPlotW, kTop + plot_h, "#555");
  svg.text(kLeft + kPlotW / 2, kTop + plot_h + 40, "step time (ms, max over ranks); box = p25-p75, bar = p50, whiskers = min-max",
           {"middle", 12});
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    const auto& s = row.times->stats;
    const double top = kTop + kRowH * static_cast<double>(i);
    const double mid = top + 56;
    svg.text(kLeft, top + 16, row.label, {"start", 12, "#222", true});
    svg.text(kLeft + kPlotW, top + 16,
             fmt::format("p50 {} ms  p90 {} ms  p95 {} ms  n={}", format_ms(s.p50), format_ms(s.p90), format_ms(s.p95),
                         s.count),
             {"end", 11});
    svg.line(x(s.min * 1e3), mid, x(s.p25 * 1e3), mid, row.colour, 1.5);
    svg.line(x(s.p75 * 1e3), mid, x(s.max * 1e3), mid, row.colour, 1.5);
    svg.line(x(s.min * 1e3), mid - 8, x(s.min * 1e3), mid + 8, row.colour, 1.5);
    svg.line(x(s.max * 1e3), mid - 8, x(s.max * 1e3), mid + 8, row.colour, 1.5);
    svg.rect(x(s.p25 * 1e3), mid - 16, x(s.p75 * 1e3) - x(s.p25 * 1e3), 32, "rgba(0,0,0,0.06)");
    svg.line(x(s.p25 * 1e3), mid - 16, x(s.p75 * 1e3), mid - 16, row.colour, 1.5);
    svg.line(x(s.p25 * 1e3), mid + 16, x(s.p75 * 1e3), mid + 16, row.colour, 1.5);
    svg.line(x(s.p25 * 1e3), mid - 16, x(s.p25 * 1e3), mid + 16, row.colour, 1.5);
    svg.line(x(s.p75 * 1e3), mid - 16, x(s.p75 * 1e3), mid + 16, row.colour, 1.5);
    svg.line(x(s.p50 * 1e3), mid - 16, x(s.p50 * 1e3), mid + 16, row.colour, 3.5);
    // Every raw step as a dot, spread vertically by a deterministic low-discrepancy jitter.
    for (size_t k = 0; k < row.times->times_s.size(); ++k) {
      const double jitter = std::fmod(static_cast<double>(k) * 0.6180339887, 1.0) - 0.5;
      svg.circle(x(row.times->times_s[k] * 1e3), mid + jitter * 26, 2.5, row.colour, 0.45);
    }
  }
  return svg.str();
}

std::string breakdown_chart(const Report& r) {
  std::vector<const TrialSummary*> trials;
  bool any_breakdown = false;
  for (const auto& t : r.trials) {
    if (t.record.status != TrialStatus::kOk || !t.stats) continue;
    trials.push_back(&t);
    any_breakdown = any_breakdown || t.metrics.compute_s || t.metrics.exposed_comm_s;
  }
  if (trials.empty()) return note("No successful trial to break down.");
  double hi = 0;
  for (const auto* t : trials) hi = std::max(hi, t->stats->p50 * 1e3);
  const auto ticks = axis_ticks(0, hi, true);
  constexpr double kLabelW = 330, kLeft = kLabelW + 10, kPlotW = 520, kTop = 34, kRowH = 24;
  const double plot_h = kRowH * static_cast<double>(trials.size());
  Svg svg(900, kTop + plot_h + 50, "Compute and exposed communication per trial");
  const Scale x{0, ticks.back(), kLeft, kLeft + kPlotW};
  // Legend.
  double lx = kLeft;
  for (const auto& [name, c] : {std::pair<const char*, const char*>{"compute", kComputeColour},
                                {"exposed communication", kExposedColour},
                                {any_breakdown ? "rest of the step" : "step time (no probe breakdown)", kRestColour}}) {
    svg.rect(lx, 10, 14, 10, c);
    svg.text(lx + 20, 19, name, {"start", 12});
    lx += 40 + 7.0 * std::char_traits<char>::length(name);
  }
  for (double v : ticks) {
    svg.line(x(v), kTop, x(v), kTop + plot_h, "#eeeeee");
    svg.text(x(v), kTop + plot_h + 18, tick_label(v), {"middle", 11});
  }
  svg.text(kLeft + kPlotW / 2, kTop + plot_h + 40, "p50 step time (ms), split by the probe's per-step medians",
           {"middle", 12});
  for (size_t i = 0; i < trials.size(); ++i) {
    const auto& t = *trials[i];
    const double top = kTop + kRowH * static_cast<double>(i);
    std::string label = fmt::format("#{} {}: {}", t.record.ordinal, to_string(t.record.role), t.config_text);
    if (label.size() > 52) label = label.substr(0, 49) + "...";
    svg.text(kLabelW, top + 16, label, {"end", 11});
    const double step_ms = t.stats->p50 * 1e3;
    const double compute_ms = std::clamp(t.metrics.compute_s.value_or(0) * 1e3, 0.0, step_ms);
    const double exposed_ms = std::clamp(t.metrics.exposed_comm_s.value_or(0) * 1e3, 0.0, step_ms - compute_ms);
    const std::string tip = fmt::format("trial {}: {}; p50 {:.2f} ms, compute {} ms, exposed comm {} ms, comm {} ms",
                                        t.record.ordinal, t.config_text, step_ms, format_ms(t.metrics.compute_s),
                                        format_ms(t.metrics.exposed_comm_s), format_ms(t.metrics.comm_s));
    svg.rect(x(0), top + 4, x(compute_ms) - x(0), 16, kComputeColour, tip);
    svg.rect(x(compute_ms), top + 4, x(compute_ms + exposed_ms) - x(compute_ms), 16, kExposedColour, tip);
    svg.rect(x(compute_ms + exposed_ms), top + 4, x(step_ms) - x(compute_ms + exposed_ms), 16, kRestColour, tip);
    svg.text(x(step_ms) + 4, top + 16, fmt::format("{:.1f}", step_ms), {"start", 10, "#555"});
  }
  svg.line(kLeft, kTop, kLeft, kTop + plot_h, "#555");
  return svg.str();
}

// Per config (its search trials' p50, median over them): the measured step as a bar, the step
// model's bound as a black tick, the gap labelled with the efficiency.
std::string bound_chart(const Report& r) {
  struct Row {
    std::string label;
    std::vector<double> steps_ms;
    double bound_ms = 0;
  };
  std::vector<Row> rows;
  for (const auto& t : r.trials) {
    if (t.record.status != TrialStatus::kOk || !t.stats || !t.bound_s || t.record.role == TrialRole::kCalibration) continue;
    auto it = std::find_if(rows.begin(), rows.end(), [&](const Row& row) { return row.label == t.config_text; });
    if (it == rows.end()) {
      rows.push_back({t.config_text, {}, *t.bound_s * 1e3});
      it = rows.end() - 1;
    }
    it->steps_ms.push_back(t.stats->p50 * 1e3);
  }
  if (rows.empty()) {
    return note(r.model_note.empty() ? "No trial with a bound to plot." : "No bound to plot: " + r.model_note + ".");
  }
  double hi = 0;
  for (const auto& row : rows) hi = std::max({hi, tuner::median(row.steps_ms), row.bound_ms});
  const auto ticks = axis_ticks(0, hi, true);
  constexpr double kLabelW = 330, kLeft = kLabelW + 10, kPlotW = 480, kTop = 34, kRowH = 24;
  const double plot_h = kRowH * static_cast<double>(rows.size());
  Svg svg(900, kTop + plot_h + 50, "Measured step time against the bound, per configuration");
  const Scale x{0, ticks.back(), kLeft, kLeft + kPlotW};
  svg.rect(kLeft, 10, 14, 10, kComputeColour);
  svg.text(kLeft + 20, 19, "measured p50 step", {"start", 12});
  svg.rect(kLeft + 170, 8, 3, 14, "#000");
  svg.text(kLeft + 180, 19, "bound (efficiency = bound / measured)", {"start", 12});
  for (double v : ticks) {
    svg.line(x(v), kTop, x(v), kTop + plot_h, "#eeeeee");
    svg.text(x(v), kTop + plot_h + 18, tick_label(v), {"middle", 11});
  }
  svg.text(kLeft + kPlotW / 2, kTop + plot_h + 40, "step time (ms, max over ranks)", {"middle", 12});
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    const double top = kTop + kRowH * static_cast<double>(i);
    const double step_ms = tuner::median(row.steps_ms);
    std::string label = row.label.size() > 52 ? row.label.substr(0, 49) + "..." : row.label;
    svg.text(kLabelW, top + 16, label, {"end", 11});
    const std::string tip = fmt::format("{}: measured {:.1f} ms, bound {:.1f} ms, efficiency {:.0f}%", row.label,
                                        step_ms, row.bound_ms, 100 * row.bound_ms / step_ms);
    svg.rect(x(0), top + 4, x(step_ms) - x(0), 16, kComputeColour, tip);
    svg.rect(x(row.bound_ms) - 1.5, top + 1, 3, 22, "#000", tip);
    svg.text(std::max(x(step_ms), x(row.bound_ms)) + 6, top + 16,
             fmt::format("{:.1f} / {:.1f} ms ({:.0f}%)", step_ms, row.bound_ms, 100 * row.bound_ms / step_ms),
             {"start", 10, "#555"});
  }
  svg.line(kLeft, kTop, kLeft, kTop + plot_h, "#555");
  return svg.str();
}

// The loss trajectories the convergence guard judged (one per numerics, compressed from the first
// step) against the uncompressed one (same weights, same batches), on a log scale.
std::string loss_chart(const Report& r) {
  std::vector<const TrialSummary*> shown;
  bool judged = false;
  for (const auto& t : r.trials) {
    // Each trajectory once: the trial that measured it (the others name it in trajectory_trial).
    if (t.metrics.trajectory.empty() || t.metrics.trajectory_trial || !t.config) continue;
    const bool compressed = changes_numerics(*t.config);
    if (compressed && t.metrics.guard.is_null()) continue;
    judged = judged || compressed;
    shown.push_back(&t);
  }
  if (!judged) return note("No compressed trial was judged by the convergence guard (compression was not searched).");
  double lo = 0, hi = 0;
  size_t steps = 0;
  bool first = true;
  for (const auto* t : shown) {
    steps = std::max(steps, t->metrics.trajectory.size());
    for (double loss : t->metrics.trajectory) {
      if (!(loss > 0) || !std::isfinite(loss)) continue;
      lo = first ? loss : std::min(lo, loss);
      hi = first ? loss : std::max(hi, loss);
      first = false;
    }
  }
  if (first || steps < 2) return note("No loss trajectory to plot.");
  constexpr double kLeft = 60, kTop = 10, kPlotW = 600, kPlotH = 260;
  Svg svg(900, kTop + kPlotH + 50, "Loss trajectories of the trials the convergence guard judged");
  const Scale x{0, static_cast<double>(steps - 1), kLeft, kLeft + kPlotW};
  const Scale y{lo, hi > lo ? hi : lo * 10, kTop + kPlotH, kTop, true};
  for (double v : nice_ticks(0, static_cast<double>(steps - 1), 6)) {
    svg.line(x(v), kTop, x(v), kTop + kPlotH, "#eeeeee");
    svg.text(x(v), kTop + kPlotH + 18, tick_label(v), {"middle", 11});
  }
  for (double decade = std::pow(10, std::floor(std::log10(lo))); decade <= hi * 10; decade *= 10) {
    if (decade < lo || decade > y.d1) continue;
    svg.line(kLeft, y(decade), kLeft + kPlotW, y(decade), "#eeeeee");
    svg.text(kLeft - 6, y(decade) + 4, tick_label(decade), {"end", 11});
  }
  svg.line(kLeft, kTop + kPlotH, kLeft + kPlotW, kTop + kPlotH, "#555");
  svg.text(kLeft + kPlotW / 2, kTop + kPlotH + 40,
           "trajectory step (compression from the first); loss, mean over ranks, log scale",
           {"middle", 12});
  for (size_t i = 0; i < shown.size(); ++i) {
    const auto* t = shown[i];
    std::vector<std::pair<double, double>> points;
    for (size_t k = 0; k < t->metrics.trajectory.size(); ++k) {
      const double loss = t->metrics.trajectory[k];
      if (loss > 0 && std::isfinite(loss)) points.emplace_back(x(static_cast<double>(k)), y(loss));
    }
    svg.polyline(points, colour(i), 1.5);
    const double legend_y = kTop + 14 + 18 * static_cast<double>(i);
    svg.line(kLeft + kPlotW + 14, legend_y - 4, kLeft + kPlotW + 34, legend_y - 4, colour(i), 3);
    const bool compressed = changes_numerics(*t->config);
    svg.text(kLeft + kPlotW + 40, legend_y,
             fmt::format("#{} {}{}{}", t->record.ordinal, t->config->describe(),
                         compressed ? fmt::format(" (guard: {}", guard_verdict(t->metrics.guard))
                                    : std::string(" (uncompressed)"),
                         compressed && t->metrics.inflation
                             ? fmt::format(", inflation {})", t->metrics.inflation->describe())
                             : std::string(compressed ? ")" : "")),
             {"start", 11});
  }
  return svg.str();
}

// An online session's windows over the job's steps: the warm-up as a grey band, each window's
// measured steps as dots at their step (its discarded first steps as a pale band), its p50 as a bar
// across it, one colour per config (the job's own DDP grey), and where exploration ended.
std::string windows_chart(const Report& r) {
  std::vector<const TrialSummary*> windows;
  for (const auto& t : r.trials) {
    if (t.window && t.stats) windows.push_back(&t);
  }
  if (windows.empty()) return note("No window with measured steps to plot.");
  int64_t end = r.decision_from_step.value_or(0);  // the x axis ends there, or at the last window's end
  double lo = windows.front()->stats->min, hi = windows.front()->stats->max;
  for (const auto* t : windows) {
    end = std::max(end, t->window->last_step + 1);
    lo = std::min(lo, t->stats->min);
    hi = std::max(hi, t->stats->max);
  }
  // Colours: the job's own DDP grey, each candidate config its own, in the order they first ran.
  std::vector<std::pair<std::string, const char*>> legend;
  const auto colour_of = [&legend](const TrialSummary& t) {
    const bool own = t.window->ran == "baseline";
    const std::string label = own ? fmt::format("job's own DDP: {}", t.config_text) : t.config_text;
    for (const auto& [known, c] : legend) {
      if (known == label) return c;
    }
    const size_t candidates = static_cast<size_t>(std::count_if(
        legend.begin(), legend.end(), [](const auto& entry) { return entry.second != kOwnDdpColour; }));
    const char* c = own ? kOwnDdpColour : colour(candidates);
    legend.emplace_back(label, c);
    return c;
  };
  constexpr double kLeft = 70, kTop = 24, kPlotW = 800, kPlotH = 280;
  const double legend_top = kTop + kPlotH + 52;
  for (const auto* t : windows) colour_of(*t);
  Svg svg(900, legend_top + 18 * static_cast<double>(legend.size() + 1), "Online windows over the job's steps");
  const Scale x{0, static_cast<double>(end), kLeft, kLeft + kPlotW};
  const auto y_ticks = axis_ticks(lo * 1e3, hi * 1e3, false);
  const Scale y{y_ticks.front(), y_ticks.back(), kTop + kPlotH, kTop};
  if (r.warmup_steps && *r.warmup_steps > 0) {
    svg.rect(x(0), kTop, x(static_cast<double>(*r.warmup_steps)) - x(0), kPlotH, "#ececec",
             fmt::format("warm-up: steps 0-{}, the job's own DDP, untimed", *r.warmup_steps - 1));
    svg.text(x(0) + 4, kTop - 6, "warm-up", {"start", 11, "#555"});
  }
  for (double v : y_ticks) {
    svg.line(kLeft, y(v), kLeft + kPlotW, y(v), "#e4e4e4");
    svg.text(kLeft - 8, y(v) + 4, tick_label(v), {"end", 11});
  }
  for (double v : nice_ticks(0, static_cast<double>(end), 8)) {
    svg.line(x(v), kTop + kPlotH, x(v), kTop + kPlotH + 4, "#555");
    svg.text(x(v), kTop + kPlotH + 18, tick_label(v), {"middle", 11});
  }
  svg.line(kLeft, kTop + kPlotH, kLeft + kPlotW, kTop + kPlotH, "#555");
  svg.line(kLeft, kTop, kLeft, kTop + kPlotH, "#555");
  svg.text(kLeft + kPlotW / 2, kTop + kPlotH + 40, "job step (synchronised backward passes, from 0)", {"middle", 12});
  svg.text(16, kTop + kPlotH / 2, "step time (ms, max over ranks)", {"middle", 12, "#333", false, -90});
  for (const auto* t : windows) {
    const auto& w = *t->window;
    const char* c = colour_of(*t);
    const double first = static_cast<double>(w.first_step), measured = first + static_cast<double>(w.discarded);
    svg.line(x(first), kTop, x(first), kTop + kPlotH, "#f0f0f0");
    if (w.discarded > 0) {
      svg.rect(x(first), kTop, x(measured) - x(first), kPlotH, "#f7f3e8",
               fmt::format("window {}: steps {}-{} discarded (a switch)", t->record.ordinal, w.first_step,
                           w.first_step + w.discarded - 1));
    }
    for (size_t k = 0; k < t->record.step_times_s.size(); ++k) {
      svg.circle(x(measured + static_cast<double>(k) + 0.5), y(t->record.step_times_s[k] * 1e3), 2.2, c, 0.55);
    }
    const double p50 = y(t->stats->p50 * 1e3);
    svg.line(x(measured), p50, x(static_cast<double>(w.last_step + 1)), p50, c, 3);
    svg.circle((x(measured) + x(static_cast<double>(w.last_step + 1))) / 2, p50, 4, c, 1,
               fmt::format("window {} ({}, {}{}{}): {}; steps {}-{}, {} discarded; p50 {} ms", t->record.ordinal,
                           w.ran, w.phase, w.pair ? fmt::format(", pair {}", *w.pair) : "",
                           w.used ? "" : ", not used", t->config_text, w.first_step, w.last_step, w.discarded,
                           format_ms(t->stats->p50)));
  }
  if (r.decision_from_step) {
    int64_t measured_end = 0;
    for (const auto* t : windows) measured_end = std::max(measured_end, t->window->last_step + 1);
    if (*r.decision_from_step > measured_end) {
      svg.rect(x(static_cast<double>(measured_end)), kTop,
               x(static_cast<double>(*r.decision_from_step)) - x(static_cast<double>(measured_end)), kPlotH, "#f3f3f3",
               fmt::format("steps {}-{}: ran while the verdict was reached, not measured", measured_end,
                           *r.decision_from_step - 1));
    }
    const double at = x(static_cast<double>(*r.decision_from_step));
    svg.line(at, kTop, at, kTop + kPlotH, "#000", 1.5, true);
    svg.text(at - 4, kTop - 6, fmt::format("decision from step {}", *r.decision_from_step), {"end", 11, "#000"});
  }
  double legend_y = legend_top;
  for (const auto& [label, c] : legend) {
    svg.rect(kLeft, legend_y - 9, 14, 10, c);
    svg.text(kLeft + 20, legend_y, label, {"start", 12});
    legend_y += 18;
  }
  svg.text(kLeft, legend_y, "dots: measured steps; bar: the window's p50; pale band: discarded steps after a switch",
           {"start", 11, "#555"});
  return svg.str();
}

std::string text_table(const TextTable& table) {
  std::string out = "<div class=\"wide\"><table>\n<tr>";
  for (const auto& title : table.header) out += fmt::format("<th>{}</th>", e(title));
  out += "</tr>\n";
  for (const auto& row : table.rows) {
    out += "<tr>";
    for (size_t i = 0; i < row.size(); ++i) {
      out += fmt::format("<td{}>{}</td>", table.numeric[i] ? " class=\"num\"" : "", e(row[i]));
    }
    out += "</tr>\n";
  }
  return out + "</table></div>\n";
}

void key_value_table(std::string& out, const std::vector<std::pair<std::string, std::string>>& rows) {
  out += "<table class=\"kv\">\n";
  for (const auto& [key, value] : rows) out += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", e(key), e(value));
  out += "</table>\n";
}

std::string trials_table(const Report& r) {
  if (r.trials.empty()) return note("No trials recorded.");
  const auto columns = shown_columns(kInHtml, r);
  std::string out = "<div class=\"wide\"><table class=\"trials\">\n<tr>";
  for (const auto* column : columns) out += fmt::format("<th>{}</th>", e(column->human_title()));
  out += "</tr>\n";
  for (const auto& t : r.trials) {
    const bool chosen = r.decision && t.config && *t.config == r.decision->config;
    out += chosen ? "<tr class=\"chosen\">" : "<tr>";
    for (const auto* column : columns) {
      const std::string cell = human_cell(*column, r, t);
      switch (column->kind) {
        case ColumnKind::kStatus: {
          const bool ok = cell == to_string(TrialStatus::kOk);
          out += fmt::format("<td><span class=\"status {}\">{}</span></td>", ok ? "ok" : "bad", e(cell));
          break;
        }
        case ColumnKind::kConfig: out += fmt::format("<td class=\"cfg\">{}</td>", e(cell)); break;
        default: out += fmt::format("<td{}>{}</td>", column->numeric() ? " class=\"num\"" : "", e(cell));
      }
    }
    out += "</tr>\n";
    // The error on a row of its own, under the trial's number.
    if (!t.record.error.empty()) {
      out += fmt::format("<tr><td></td><td colspan=\"{}\" class=\"error\">error: {}</td></tr>\n", columns.size() - 1,
                         e(t.record.error));
    }
  }
  return out + "</table></div>\n";
}

std::string decision_section(const Report& r) {
  if (!r.decision) {
    return note(fmt::format("No decision stored for this session (session status: {}).", to_string(r.session.status)));
  }
  const auto& d = *r.decision;
  std::string out = fmt::format("<p class=\"verdict\">Decision {} ({}) for {} on {}: <strong>{}</strong></p>\n<ul>\n",
                                d.id, d.active ? "active" : "not active", e(r.session.model_name),
                                e(r.session.instance_type), e(d.config.describe()));
  for (const auto& fact : decision_facts(r)) out += fmt::format("<li>{}</li>\n", e(fact));
  out += "</ul>\n<h3>Alternated repeats</h3>\n";
  if (r.pairs.empty()) {
    out += note("No alternated candidate/baseline repeats recorded.");
  } else {
    out += "<p>Each repeat runs the candidate and the baseline back to back in the same workers; speedup = "
           "baseline p50 / candidate p50.</p>\n<table>\n<tr><th>Repeat</th><th>Candidate trial #</th>"
           "<th>Baseline trial #</th><th>Candidate p50 (ms)</th><th>Baseline p50 (ms)</th><th>Speedup</th></tr>\n";
    for (size_t i = 0; i < r.pairs.size(); ++i) {
      const auto& p = r.pairs[i];
      out += fmt::format("<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
                         "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
                         i + 1, p.candidate_ordinal, p.baseline_ordinal, format_ms(p.candidate_p50_s),
                         format_ms(p.baseline_p50_s), format_ratio(p.speedup));
    }
    out += "</table>\n";
  }
  return out;
}

constexpr const char* kStyle = R"(
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #222; margin: 24px auto;
       max-width: 1160px; padding: 0 16px; line-height: 1.4; background: #fff; }
h1 { font-size: 24px; margin-bottom: 4px; } h2 { font-size: 19px; margin-top: 32px; border-bottom: 1px solid #ddd; }
h3 { font-size: 15px; } .sub { color: #666; font-size: 13px; word-break: break-all; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f5f5f5; } table.kv th { min-width: 120px; font-weight: 500; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; } td.cfg { min-width: 180px; }
.wide { max-width: 100%; overflow-x: auto; } td.cfg, td.error { overflow-wrap: anywhere; }
tr.chosen td { background: #eef6fc; } .row { display: flex; flex-wrap: wrap; gap: 0 32px; align-items: flex-start; }
td.error { color: #a00; white-space: pre-wrap; word-break: break-word; }
.status { padding: 1px 6px; border-radius: 3px; font-size: 12px; } .status.ok { background: #e3f4e8; color: #00703c; }
.status.bad { background: #fde4e1; color: #a00; }
.note { color: #666; font-style: italic; } .verdict { font-size: 15px; }
pre { background: #f7f7f7; border: 1px solid #e2e2e2; padding: 10px; font-size: 12px; overflow-x: auto; }
figure { margin: 12px 0 24px; } figcaption { color: #555; font-size: 13px; margin-bottom: 6px; }
svg { max-width: 100%; height: auto; }
)";

}  // namespace

std::string render_html(const Report& r, const RenderOptions& options) {
  const auto& s = r.session;
  const std::string command = join(options.command_line, " ");
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n"
      "<title>acspeed tuning report: session {} ({})</title>\n<style>{}</style>\n</head>\n<body>\n"
      "<h1>acspeed tuning report: session {}</h1>\n",
      s.id, e(s.model_name), kStyle, s.id);
  if (!command.empty()) out += fmt::format("<div class=\"sub\">Generated by: {}</div>\n", e(command));
  out += fmt::format("<p class=\"sub\">{} on {}: {} device(s) on {} node(s), batch {} per device, {}; {} session "
                     "{}, started {} (UTC)</p>\n",
                     e(s.model_name), e(s.instance_type), s.world_size, s.nnodes, s.batch_size, e(s.precision),
                     e(session_kind_text(s)), e(to_string(s.status)), e(s.started_at));

  // What was decided and why, in words, first; then the plots; then the trials and the settings.
  out += "<h2>Decision</h2>\n";
  out += decision_section(r);

  out += "<h2>Plots</h2>\n";
  if (s.kind == SessionKind::kOnline) {
    out += fmt::format("<figure><figcaption>Online windows over the job's steps (hover a window's bar for its "
                       "pair and times)</figcaption>\n{}</figure>\n<p>{}</p>\n",
                       windows_chart(r), e(windows_preamble(r)));
    const TextTable windows = windows_table(r);
    if (!windows.rows.empty()) out += text_table(windows);
  }
  out += "<figure><figcaption>Throughput against bucket size, one line per algorithm / streams "
         "(search trials; hover a point for its trial)</figcaption>\n";
  out += throughput_chart(r);
  out += "</figure>\n<figure><figcaption>Step-time distribution of the best configuration against DDP's "
         "defaults (every raw step is a dot)</figcaption>\n";
  out += distribution_chart(r);
  out += "</figure>\n<figure><figcaption>Where each trial's step goes: compute, exposed (not overlapped) "
         "communication, and the rest</figcaption>\n";
  out += breakdown_chart(r);
  out += "</figure>\n<figure><figcaption>Measured step time against the bound of each configuration (the "
         "step model: compute-only step, fitted link, wire bytes)</figcaption>\n";
  out += bound_chart(r);
  out += "</figure>\n<figure><figcaption>Loss of every step of the compressed trials the convergence guard "
         "judged, against the uncompressed trials (same weights and batches)</figcaption>\n";
  out += loss_chart(r);
  out += "</figure>\n";

  out += "<h2>Trials</h2>\n";
  out += fmt::format("<p>{}</p>\n", e(trials_preamble(r)));
  out += trials_table(r);

  out += "<h2>Settings</h2>\n<div class=\"row\"><div>\n<h3>Session</h3>\n";
  key_value_table(out, {{"Kind", session_kind_text(s)},
                        {"Instance type", s.instance_type},
                        {"Model", s.model_name},
                        {"Model signature", s.model_signature},
                        {"Precision", s.precision},
                        {"World size", fmt::format("{} device(s) on {} node(s)", s.world_size, s.nnodes)},
                        {"Batch per device", std::to_string(s.batch_size)},
                        {"Strategy", fmt::format("{} (seed {})", s.strategy, s.seed)},
                        {"Status", std::string(to_string(s.status))},
                        {"Started (UTC)", s.started_at},
                        {"Finished (UTC)", s.finished_at.empty() ? "-" : s.finished_at}});
  out += "</div><div>\n<h3>Versions</h3>\n";
  if (r.versions.empty()) out += note("No versions recorded."); else key_value_table(out, r.versions);
  out += "</div><div>\n<h3>Search space</h3>\n";
  if (r.search_space.empty()) out += note("No search space recorded."); else key_value_table(out, r.search_space);
  if (!r.options.empty()) {
    out += "<h3>Options</h3>\n";
    key_value_table(out, r.options);
  }
  out += "</div></div>\n";
  if (r.decision) {
    out += fmt::format("<h3>Stored config</h3>\n<pre>{}</pre>\n", e(config_to_json(r.decision->config, 2)));
  }
  out += "</body>\n</html>\n";
  return out;
}

}  // namespace acspeed::report
