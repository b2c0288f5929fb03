// Step inflation: how many more steps a run with compressed gradients needs to reach the loss an
// uncompressed run reaches. A faster step is not a faster training when it needs more steps: the
// decision rule (decision_rule.h) divides the step speedup by this factor.
//
// On two loss trajectories of the same T steps (the same per-rank sequence of distinct batches, the
// same initial weights; the compressed one compresses from its first step; convergence_guard.h):
//   1. both are smoothed by a centred moving average of `smoothing_steps` (shorter at the ends);
//   2. target = the smoothed reference loss at step round(target_fraction x (T - 1)), one third of the
//      way through by default, so that an inflation up to about 3 can be measured within T steps;
//   3. each curve's steps to the target = the first step where its smoothed loss is at or below the
//      target, interpolated linearly between the two steps around the crossing (the loss of step i is
//      taken after i optimizer steps, so the initial loss is step 0);
//   4. inflation = the compressed run's steps to the target / the reference's.
// The 95% interval comes from a moving-block bootstrap over the steps: the residuals of both curves
// around their smoothed trends, scaled by sqrt(window / (window - 1)) (a residual around a mean that
// includes its own step has the noise's variance times 1 - 1 / window), are resampled in blocks of
// `block_steps` consecutive steps (the same blocks for both curves, which share their batches); each
// resample's smoothed curve is the smoothed curve plus its smoothed resampled noise, and steps 2-4 run
// again on it (seeded: the same inputs and seed give the same interval). Two choices make the
// interval hold its 95% (bench/compression/inflation_coverage.py, bench/compression/RESULTS.md):
//   * the resampled noise is smoothed and added to the smoothed curve, not added to it and the sum
//     smoothed again: smoothing twice shifts a curving trend, which moved every resample's crossing
//     away from the estimate (intervals with the estimate at one end and the other end far off);
//   * blocks are short against the window (default a quarter of it): residuals around a window's
//     mean lack the noise's slow part, the part the smoothed loss keeps, and blocks as long as the
//     window resample them without it (intervals too narrow: 84-94.5% coverage of a 95% interval).
// A resample in which the compressed run never reaches the target counts as an infinite inflation, so
// the interval's upper end is unbounded when more than 2.5% of them do.
//
// The verdict is one of:
//   measured      the estimate and its interval;
//   infinite      the compressed run never reaches the target within the T steps (its inflation is
//                 above T / the reference's steps, without a bound);
//   unmeasurable  the reference's drop from its smoothed start to the target is within noise: at most
//                 noise_z x the noise of that difference of two smoothed losses, sigma x sqrt(2 / window),
//                 where sigma = 1.4826 x the median absolute residual around the smoothed reference
//                 (the loss noise of one step), so there is no progress to measure a number of steps on.
// Configs that do not change numerics have inflation 1 by definition (no_inflation()).
//
// Near-exact numerics (near_exact_inflation()): when the gradient-fidelity window
// (convergence_guard.h) shows every step's compressed gradient within a relative error e <=
// kNearExactError of the exact one (e = the larger of the worst step's angle, sqrt(2 (1 - cosine)),
// and the window's relative norm error), each update differs from the uncompressed one by at most e
// of its size, and to first order so does each step's progress: the run needs between (1 - e) / (1 + e)
// and (1 + e) / (1 - e) times the steps to a loss. That bound is the inflation's interval, with
// estimate 1, where the trajectories' own interval includes 1 (it does not contradict the bound).
// Loss trajectories cannot resolve a difference that small: their intervals are SGD's noise on a
// curve that flattens (bench/compression/RESULTS.md: fp16 at 1.00x [0.52, 2.24] on 120 steps,
// 0.96x [.., 3.06] on 240, against e = 0.0013). fp16 and bf16 casts are near-exact; PowerSGD is not.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace acspeed::tuner {

struct InflationOptions {
  double target_fraction = 1.0 / 3;  // where on the reference's trajectory the target loss is taken
  int smoothing_steps = 0;           // moving-average window (odd); 0: max(3, T / 10), made odd
  int block_steps = 0;               // bootstrap block length; 0: a quarter of the smoothing window, at least 1
  int resamples = 1000;              // bootstrap resamples
  double noise_z = 3.0;              // unmeasurable when the reference's drop <= noise_z x the drop's noise
  uint64_t seed = 0;                 // the bootstrap's generator (the session's seed)
};

enum class InflationKind { kMeasured, kInfinite, kUnmeasurable };
std::string_view to_string(InflationKind kind);

struct Inflation {
  InflationKind kind = InflationKind::kUnmeasurable;
  double estimate = 1;  // kMeasured: the compressed run's steps to the target / the reference's
  double low = 1;       // 95% interval (kMeasured); high is +infinity when the interval is unbounded
  double high = 1;
  bool by_definition = false;  // a config that changes no numerics: 1, nothing measured
  double gradient_error = 0;   // > 0: a near-exact numerics' e, the interval is its bound (see above)
  int steps = 0;               // T: steps compared (the shorter trajectory's length)
  int smoothing_steps = 0, block_steps = 0, resamples = 0;
  double target = 0;           // the target loss (smoothed reference at target_fraction)
  double reference_steps = 0;  // steps the reference needed to reach the target (interpolated)
  double candidate_steps = 0;  // steps the compressed run needed (kMeasured)
  double drop = 0;             // the reference's smoothed start loss - the target
  double noise = 0;            // the noise of the drop: sigma x sqrt(2 / smoothing_steps) (see above)
  std::string reason;          // kInfinite / kUnmeasurable: why, in words

  bool finite_upper() const;  // kMeasured with a bounded interval
  // "1.42x [1.21, 1.80]", "1 (no compression)", "infinite (...)", "unmeasurable (...)".
  std::string describe() const;
};

// Inflation 1 of a config that changes no numerics.
Inflation no_inflation();

// Gradients within this relative error of the exact ones on every step make a numerics near-exact.
inline constexpr double kNearExactError = 0.01;

// The relative gradient error e of a fidelity window (its worst step's cosine, its norm error), or
// nullopt when the figures are missing or e > kNearExactError.
std::optional<double> near_exact_error(std::optional<double> step_cosine_min, std::optional<double> norm_error);

// A near-exact numerics' inflation: estimate 1, the interval [(1 - e) / (1 + e), (1 + e) / (1 - e)],
// gradient_error e; the trajectories' figures (steps, target, ...) kept for the record. nullopt when
// `trajectories` is not measured or its interval excludes 1.
std::optional<Inflation> near_exact_inflation(double error, const Inflation& trajectories);

// The inflation of `compressed` against `reference` (loss per step, mean over ranks); trajectories
// shorter than 6 steps, or with a non-finite loss, are unmeasurable with the reason.
Inflation measure_inflation(const std::vector<double>& compressed, const std::vector<double>& reference,
                            const InflationOptions& options = {});

// Evidence form: kind, estimate, low, high (null when unbounded), by_definition, the steps, target,
// drop, noise and reason. from_json reads it back (reports).
void to_json(nlohmann::json& j, const Inflation& inflation);
void from_json(const nlohmann::json& j, Inflation& inflation);

}  // namespace acspeed::tuner
