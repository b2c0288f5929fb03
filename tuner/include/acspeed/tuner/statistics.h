// Statistics of the tuner: step-time percentiles and the paired-speedup decision.
//
// One sample = one alternated (candidate, baseline) pair run in the same workers; the speedup of a
// pair = baseline median step time / candidate median step time. Speedups are ratios, so the
// interval is computed on their logarithms and mapped back: the reported speedup is the geometric
// mean of the pairs, and the 95% interval is either Student's t on the log speedups (few pairs: the
// honest, wide choice) or a percentile bootstrap of the mean log speedup, seeded with the session's
// seed so a session's decision can be reproduced. A candidate is accepted only if the interval's
// lower end is above 1.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace acspeed::tuner {

// Linear-interpolation percentile (the "R-7" / numpy default) of `values`, q in [0, 100].
// Throws InvalidArgument on an empty input or q out of range.
double percentile(std::vector<double> values, double q);
double median(const std::vector<double>& values);
double mean(const std::vector<double>& values);
// Sample standard deviation (n - 1); 0 for fewer than two values.
double stddev(const std::vector<double>& values);

// Two-sided critical value of Student's t for `dof` degrees of freedom at 95% (t_{0.975, dof}).
double t_critical_95(int dof);

struct Interval {
  double estimate = 0;
  double low = 0;
  double high = 0;
};

// Mean of `values` with its 95% Student-t interval; needs at least two values.
Interval t_interval_95(const std::vector<double>& values);
// Mean of `values` with the 95% percentile-bootstrap interval from `resamples` resamples drawn
// with a generator seeded by `seed` (same inputs and seed -> same interval).
Interval bootstrap_interval_95(const std::vector<double>& values, uint64_t seed, int resamples = 10000);

enum class IntervalMethod { kStudentT, kBootstrap };

// The speedup of one alternated pair: the baseline's median step time / the candidate's. Throws
// InvalidArgument for an empty side.
double pair_speedup(const std::vector<double>& candidate_steps_s, const std::vector<double>& baseline_steps_s);

struct PairedSpeedup {
  std::vector<double> speedups;  // per pair: baseline median / candidate median
  double speedup = 1;            // geometric mean of the pair speedups
  double ci_low = 1;             // 95% interval of the speedup
  double ci_high = 1;
  bool accepted = false;         // ci_low > 1
};

// Pairs i = (candidate_steps[i], baseline_steps[i]), each a trial's raw step times. Needs at least
// two pairs (the decision phase runs at least three); throws InvalidArgument otherwise.
PairedSpeedup paired_speedup(const std::vector<std::vector<double>>& candidate_steps,
                             const std::vector<std::vector<double>>& baseline_steps, IntervalMethod method,
                             uint64_t seed);

// Compression changes numerics: a compressed run is acceptable only when its loss is finite and
// within `tolerance` of the uncompressed run's loss after the same steps from the same weights and
// batch. The scale is the larger of the uncompressed final loss and the progress the trial made
// from `initial_loss` (when known): a loss driven close to 0 makes a relative difference of the
// final values meaningless (0.045 vs 0.041 after 7.08 -> 0.04 is the same training), while a run
// that stopped learning differs by the whole progress.
bool loss_within_tolerance(double compressed_loss, double uncompressed_loss, double tolerance,
                           std::optional<double> initial_loss = std::nullopt);

}  // namespace acspeed::tuner
