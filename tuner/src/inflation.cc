#include "acspeed/tuner/inflation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>

#include <fmt/format.h>

#include "acspeed/error.h"
#include "acspeed/tuner/statistics.h"

namespace acspeed::tuner {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr size_t kMinSteps = 6;

// Centred moving average of `window` (odd) steps, shorter at the ends.
std::vector<double> smooth(const std::vector<double>& values, int window) {
  const auto n = static_cast<std::ptrdiff_t>(values.size());
  const std::ptrdiff_t half = window / 2;
  std::vector<double> out(values.size());
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const std::ptrdiff_t lo = std::max<std::ptrdiff_t>(0, i - half);
    const std::ptrdiff_t hi = std::min(n - 1, i + half);
    double sum = 0;
    for (std::ptrdiff_t k = lo; k <= hi; ++k) sum += values[static_cast<size_t>(k)];
    out[static_cast<size_t>(i)] = sum / static_cast<double>(hi - lo + 1);
  }
  return out;
}

// The first (fractional) step at which `curve` is at or below `target`; nullopt when it never is.
std::optional<double> steps_to(const std::vector<double>& curve, double target) {
  for (size_t i = 0; i < curve.size(); ++i) {
    if (curve[i] > target) continue;
    if (i == 0) return 0.0;
    const double above = curve[i - 1], below = curve[i];
    return static_cast<double>(i - 1) + (above - target) / (above - below);
  }
  return std::nullopt;
}

struct Point {
  double target = 0, drop = 0, reference_steps = 0;
  std::optional<double> candidate_steps;  // nullopt: never reached
};

// Steps 1-4 of the header on smoothed curves of equal length; reference_steps <= 0 when the
// reference does not fall to its own target after its start.
Point point_estimate(const std::vector<double>& smooth_candidate, const std::vector<double>& smooth_reference,
                     double target_fraction) {
  Point p;
  const size_t n = smooth_reference.size();
  const auto at = static_cast<size_t>(std::lround(target_fraction * static_cast<double>(n - 1)));
  p.target = smooth_reference[at];
  p.drop = smooth_reference.front() - p.target;
  p.reference_steps = steps_to(smooth_reference, p.target).value_or(0);
  p.candidate_steps = steps_to(smooth_candidate, p.target);
  return p;
}

// The bootstrap's default block: a quarter of the smoothing window, rounded, at least 1 (the header
// says why it is short). Long enough to carry a correlation between neighbouring steps' noise.
int default_block(int window) { return std::max(1, (window + 2) / 4); }

// Nearest-rank quantile of sorted values (which may hold +infinity): no interpolation across it.
double quantile_sorted(const std::vector<double>& sorted, double q) {
  const double rank = q * static_cast<double>(sorted.size() - 1);
  return sorted[static_cast<size_t>(std::lround(rank))];
}

std::string format_factor(double value) { return std::isfinite(value) ? fmt::format("{:.2f}", value) : "inf"; }

}  // namespace

std::string_view to_string(InflationKind kind) {
  switch (kind) {
    case InflationKind::kMeasured: return "measured";
    case InflationKind::kInfinite: return "infinite";
    case InflationKind::kUnmeasurable: return "unmeasurable";
  }
  return "unmeasurable";
}

bool Inflation::finite_upper() const { return kind == InflationKind::kMeasured && std::isfinite(high); }

std::string Inflation::describe() const {
  if (by_definition) return "1 (no compression)";
  switch (kind) {
    case InflationKind::kMeasured:
      if (gradient_error > 0) {
        return fmt::format("{:.2f}x [{:.4f}, {:.4f}] (near-exact: gradients within {:.2g} of the exact ones)", estimate,
                           low, high, gradient_error);
      }
      return fmt::format("{:.2f}x [{}, {}]", estimate, format_factor(low), format_factor(high));
    case InflationKind::kInfinite: return "infinite (" + reason + ")";
    case InflationKind::kUnmeasurable: return "unmeasurable (" + reason + ")";
  }
  return reason;
}

Inflation no_inflation() {
  Inflation i;
  i.kind = InflationKind::kMeasured;
  i.by_definition = true;
  return i;
}

std::optional<double> near_exact_error(std::optional<double> step_cosine_min, std::optional<double> norm_error) {
  if (!step_cosine_min || !norm_error || !std::isfinite(*step_cosine_min) || !std::isfinite(*norm_error)) {
    return std::nullopt;
  }
  const double angle = std::sqrt(2 * std::max(0.0, 1 - *step_cosine_min));
  const double error = std::max(angle, std::abs(*norm_error));
  return error <= kNearExactError ? std::optional<double>(error) : std::nullopt;
}

std::optional<Inflation> near_exact_inflation(double error, const Inflation& trajectories) {
  if (trajectories.kind != InflationKind::kMeasured || trajectories.by_definition || !(trajectories.low <= 1) ||
      !(trajectories.high >= 1)) {
    return std::nullopt;
  }
  Inflation i = trajectories;
  i.estimate = 1;
  i.low = (1 - error) / (1 + error);
  i.high = (1 + error) / (1 - error);
  i.gradient_error = error;
  return i;
}

Inflation measure_inflation(const std::vector<double>& compressed, const std::vector<double>& reference,
                            const InflationOptions& o) {
  if (!(o.target_fraction > 0 && o.target_fraction < 1)) {
    ACS_THROW(InvalidArgument, "inflation target fraction {} is not in (0, 1)", o.target_fraction);
  }
  Inflation r;
  const size_t n = std::min(compressed.size(), reference.size());
  r.steps = static_cast<int>(n);
  if (n < kMinSteps) {
    r.reason = fmt::format("{} steps compared, fewer than {}", n, kMinSteps);
    return r;
  }
  auto finite = [n](const std::vector<double>& v) {
    return std::all_of(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n), [](double x) { return std::isfinite(x); });
  };
  if (!finite(compressed) || !finite(reference)) {
    r.reason = "a loss of the trajectories is NaN/Inf";
    return r;
  }
  const std::vector<double> raw_c(compressed.begin(), compressed.begin() + static_cast<std::ptrdiff_t>(n));
  const std::vector<double> raw_r(reference.begin(), reference.begin() + static_cast<std::ptrdiff_t>(n));
  int window = o.smoothing_steps > 0 ? o.smoothing_steps : std::max(3, static_cast<int>(n) / 10);
  if (window % 2 == 0) ++window;
  r.smoothing_steps = window;
  r.block_steps = std::min(static_cast<int>(n), o.block_steps > 0 ? o.block_steps : default_block(window));
  const std::vector<double> smooth_c = smooth(raw_c, window), smooth_r = smooth(raw_r, window);

  std::vector<double> residual_c(n), residual_r(n), spread(n);
  // A step's residual around a centred mean of `window` steps that include it has the variance of the
  // noise times (1 - 1 / window): resampled, the residuals are scaled back to the noise's.
  const double rescale = window > 1 ? std::sqrt(static_cast<double>(window) / static_cast<double>(window - 1)) : 1.0;
  for (size_t i = 0; i < n; ++i) {
    residual_c[i] = raw_c[i] - smooth_c[i];
    residual_r[i] = raw_r[i] - smooth_r[i];
    spread[i] = std::abs(residual_r[i]);
    residual_c[i] *= rescale;
    residual_r[i] *= rescale;
  }
  // The drop is the difference of two smoothed losses, each a mean of `window` noisy steps.
  r.noise = 1.4826 * median(spread) * std::sqrt(2.0 / static_cast<double>(window));

  const Point p = point_estimate(smooth_c, smooth_r, o.target_fraction);
  r.target = p.target;
  r.drop = p.drop;
  r.reference_steps = p.reference_steps;
  if (p.drop <= o.noise_z * r.noise || p.reference_steps <= 0) {
    r.reason = fmt::format("the uncompressed loss falls {:.4g} to the target {:.4g} over {} steps, within noise "
                           "({:g} x {:.3g})",
                           p.drop, p.target, n, o.noise_z, r.noise);
    return r;
  }
  if (!p.candidate_steps) {
    r.kind = InflationKind::kInfinite;
    r.estimate = r.low = r.high = kInfinity;
    r.reason = fmt::format("the compressed run never reaches the loss {:.4g} within {} steps; the uncompressed run "
                           "reached it in {:.1f}",
                           p.target, n, p.reference_steps);
    return r;
  }
  r.kind = InflationKind::kMeasured;
  r.candidate_steps = *p.candidate_steps;
  r.estimate = r.candidate_steps / r.reference_steps;

  // Moving-block bootstrap of the residuals around both trends, the same blocks for both curves; a
  // resample is each smoothed curve plus its smoothed resampled noise (see the header).
  std::mt19937_64 generator(o.seed);
  const size_t block = static_cast<size_t>(r.block_steps);
  // Residuals come from the steps whose window is whole: at the ends the window is shorter and
  // lopsided, and there the residual is mostly the trend's curvature, not noise.
  const size_t half = static_cast<size_t>(window / 2);
  const size_t first = n >= 2 * half + block ? half : 0;
  const uint64_t starts = n - 2 * first - block + 1;
  std::vector<double> estimates;
  estimates.reserve(static_cast<size_t>(std::max(0, o.resamples)));
  std::vector<double> noise_c(n), noise_r(n), c(n), ref(n);
  for (int b = 0; b < o.resamples; ++b) {
    for (size_t i = 0; i < n;) {
      // Modulo keeps the draw identical across standard libraries (distributions are not).
      const size_t start = first + static_cast<size_t>(generator() % starts);
      for (size_t k = 0; k < block && i < n; ++k, ++i) {
        noise_c[i] = residual_c[start + k];
        noise_r[i] = residual_r[start + k];
      }
    }
    const std::vector<double> smooth_noise_c = smooth(noise_c, window), smooth_noise_r = smooth(noise_r, window);
    for (size_t i = 0; i < n; ++i) {
      c[i] = smooth_c[i] + smooth_noise_c[i];
      ref[i] = smooth_r[i] + smooth_noise_r[i];
    }
    const Point q = point_estimate(c, ref, o.target_fraction);
    if (q.reference_steps <= 0) continue;  // no drop to measure steps on in this resample
    estimates.push_back(q.candidate_steps ? *q.candidate_steps / q.reference_steps : kInfinity);
  }
  r.resamples = static_cast<int>(estimates.size());
  if (estimates.empty()) {
    r.low = r.high = r.estimate;
    return r;
  }
  std::sort(estimates.begin(), estimates.end());
  r.low = std::min(r.estimate, quantile_sorted(estimates, 0.025));
  r.high = std::max(r.estimate, quantile_sorted(estimates, 0.975));
  return r;
}

void to_json(nlohmann::json& j, const Inflation& i) {
  auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  j = {{"kind", to_string(i.kind)},
       {"estimate", number(i.estimate)},
       {"low", number(i.low)},
       {"high", number(i.high)},
       {"by_definition", i.by_definition}};
  if (i.by_definition) return;
  if (i.gradient_error > 0) j["gradient_error"] = i.gradient_error;
  j.update({{"steps", i.steps},
            {"smoothing_steps", i.smoothing_steps},
            {"block_steps", i.block_steps},
            {"resamples", i.resamples},
            {"target", i.target},
            {"reference_steps", i.reference_steps},
            {"candidate_steps", i.candidate_steps},
            {"drop", i.drop},
            {"noise", i.noise}});
  if (!i.reason.empty()) j["reason"] = i.reason;
}

void from_json(const nlohmann::json& j, Inflation& i) {
  if (!j.is_object()) ACS_THROW(InvalidArgument, "inflation evidence is not a JSON object: {}", j.dump());
  const std::string kind = j.value("kind", std::string("unmeasurable"));
  if (kind == "measured") {
    i.kind = InflationKind::kMeasured;
  } else if (kind == "infinite") {
    i.kind = InflationKind::kInfinite;
  } else if (kind == "unmeasurable") {
    i.kind = InflationKind::kUnmeasurable;
  } else {
    ACS_THROW(InvalidArgument, "inflation kind '{}' is not one of measured, infinite, unmeasurable", kind);
  }
  auto number = [&j](const char* key, double fallback) {
    return j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
  };
  i.estimate = number("estimate", kInfinity);
  i.low = number("low", kInfinity);
  i.high = number("high", kInfinity);
  i.by_definition = j.value("by_definition", false);
  i.gradient_error = number("gradient_error", 0);
  i.steps = j.value("steps", 0);
  i.smoothing_steps = j.value("smoothing_steps", 0);
  i.block_steps = j.value("block_steps", 0);
  i.resamples = j.value("resamples", 0);
  i.target = number("target", 0);
  i.reference_steps = number("reference_steps", 0);
  i.candidate_steps = number("candidate_steps", 0);
  i.drop = number("drop", 0);
  i.noise = number("noise", 0);
  i.reason = j.value("reason", std::string());
}

}  // namespace acspeed::tuner
