// The convergence guard: whether a config that changes numerics (compression) may be chosen.
// A config is judged on two pieces of evidence its trial measured, each against a stated threshold:
//
//  (a) gradient fidelity: a window of kFidelitySteps check steps after the timed ones
//      (python/acspeed/_worker/convergence_guard.py), with the weights held still: the exact average of the local
//      gradients (all-reduced without compression) against the compressed path's average of the same
//      gradients on each step, summed over the window. Error feedback makes the compressed sum track
//      the exact one: what one step leaves out is carried into the next, so the window's error is
//      the residual's change, and its share falls as the window grows, where a single PowerSGD step
//      is far from the average by nature (resnet18, rank 4: cosine 0.63 at 6 steps, 0.93 at 24, 0.98
//      at 48; bench/compression/RESULTS.md). Held weights make the window measure the compressor, not
//      the trajectory: the loss check (b) judges the trajectory.
//        cosine(sum compressed, sum exact)                 >= min_cosine (0.7)
//        | |sum compressed| - |sum exact| | / |sum exact|  <= max_norm_error (0.45)
//      The figures depend only on the numerics (compression, PowerSGD rank and start step, hierarchical
//      or flat), not on buckets or lanes: the tuner measures the window once per numerics and reuses it
//      for the other trials with the same (their "fidelity_trial" names the trial that measured it).
//  (b) the loss trajectory against an uncompressed one. Trajectories are runs of their own, apart
//      from the timed steps: T steps (TuneOptions::trajectory_steps, default 120) from
//      the initial weights on the same per-rank sequence of T distinct batches (the user's --data, or
//      a learnable sequence of synthetic batches: python/acspeed/_worker/batches.py), compression active from the first
//      step (PowerSGD's start step set to 0), all batches made before any trial is timed. One
//      compressed trajectory per numerics (measured with the fidelity window, reused by the other
//      trials of the same numerics and by the decision pairs, which give no verdict of their own) and
//      one uncompressed trajectory (DDP's defaults: the same math for every numerics) per session.
//      Over the T steps, the mean loss of the last quarter (the tail) may exceed the uncompressed
//      tail by at most
//        max(loss_relative x uncompressed tail, loss_progress x (uncompressed first loss - its tail)).
//      A compressed run may end lower. A failure of (b) alone by no more than undecided_z x the
//      noise of the tails' difference is within what the T steps can tell apart: the session
//      component extends both trajectories and judges again on the longer ones, by the same rule
//      (tuner/src/guard.h); at the cap it stands. That noise is the standard error of the mean of
//      the per-step differences over the tail (both runs see the same batches: the difference is
//      paired), from their residuals around a least-squares line (a trend is not noise). A
//      near-exact numerics (inflation.h: every step's gradient within 1% of the exact one) whose
//      trajectories' inflation interval includes 1 has a failure of (b) alone overruled by the
//      session component: SGD drives any two runs apart, a rounding's difference included, and one
//      pair's tails cannot tell that divergence from a lag (fp16 on digits:model10: 0.126 above,
//      allowed 0.051, with e = 0.002 and an inflation of 0.97x [0.31, 2.26]; 0.012 above on another
//      machine with the same seed). The verdict depends only on (a)'s window and (b)'s
//      trajectories, both measured once per numerics: a later search trial of a numerics the guard
//      rejected is stored as failed with that verdict, without running (tuner/src/guard.h). The workers
//      time both ("fidelity_s", "trajectory_s"), and the session says after its search what they
//      cost. The same two trajectories give the step inflation
//      (inflation.h), which the decision rule divides the step speedup by. Fixtures (tests/tuner/convergence_guard_test.cc): 0.39 vs
//      0.0406 from 7.08 fails (excess 0.349 > 0.070), 0.0450 vs 0.0406 passes (0.0044 <= 0.070).
//
// Calibrated on bench/compression's convergence task (300 steps, a seeded teacher network) and on
// the tuner's trials: fp16 and PowerSGD rank 4 with error feedback pass; a compressor that corrupts
// gradients fails (see bench/compression/RESULTS.md for the measured values).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "acspeed/tuner/trial_metrics.h"

namespace acspeed::tuner {

// Check steps of the gradient-fidelity window (a).
inline constexpr int kFidelitySteps = 32;

// (b)'s trajectories of T steps are run again longer, up to this many times T, when the step
// inflation they give is too uncertain to decide (tuner/src/guard.h); the workers make that many
// batches when they start.
inline constexpr int kTrajectoryCapFactor = 2;

// The guard's evidence (its windows, trajectories and their extensions) is timed apart from the
// search's and the decision's trials, against a budget of its own: this many times the session's
// (TuneOptions::budget_minutes). Sharing one budget, the guard took 410-526 s of the seed command's
// 10 minutes (resnet18 on 2x1@1gbit, bench/compression/RESULTS.md) and the search stopped after the
// numerics' first points, never measuring their buckets or streams.
inline constexpr double kGuardBudgetFactor = 1.0;

struct GuardThresholds {
  double min_cosine = 0.7;       // (a) cosine of the window sums
  double max_norm_error = 0.45;  // (a) relative error of the window sum's norm
  double loss_relative = 0.25;   // (b) tail excess allowed, relative to the uncompressed tail
  double loss_progress = 0.01;   // (b) ... or to the uncompressed run's progress (first loss - tail)
  double tail_fraction = 0.25;   // (b) the tail: this share of the compared steps, at least one
  double undecided_z = 2.0;      // (b) a failure within this many times its noise is undecided (see above)
};

struct LossCheck {
  bool passed = false;
  int steps_compared = 0;
  double candidate_tail = 0, reference_tail = 0, reference_first = 0;
  double excess = 0, allowed = 0;
  double noise = 0;           // standard error of the tail's mean difference (0 with a tail under 3 steps)
  bool within_noise = false;  // failed, by no more than undecided_z x noise
};

// (b) on two loss trajectories (the mean loss over ranks of each step); an empty or non-finite
// trajectory fails.
LossCheck check_loss_trajectory(const std::vector<double>& candidate, const std::vector<double>& reference,
                                const GuardThresholds& thresholds);

// The check's figures in words: "trajectory loss over the last steps 0.91 vs 0.42 uncompressed: 0.49
// above it, allowed 0.094" (a failure reason of the guard, and `acspeed-tune inflation`'s line).
std::string describe(const LossCheck& check);

// The check's evidence form with the thresholds it used: a trial's metrics ("guard" -> "loss") and
// `acspeed-tune inflation --json` ("loss_check").
nlohmann::json loss_evidence(const LossCheck& check, const GuardThresholds& thresholds);

struct GuardVerdict {
  bool passed = false;
  bool loss_only = false;       // failed on (b) alone, on two finite trajectories
  bool loss_undecided = false;  // failed on (b) alone, within its noise: longer trajectories may decide it
  std::string reason;       // why it failed, or "" when it passed
  nlohmann::json evidence;  // thresholds, the fidelity figures, the loss check: stored in the trial's metrics
};

// (a) and (b) for a compressed trial against an uncompressed one (b: their `trajectory`). A trial
// without fidelity figures or without a loss trajectory fails (the guard must not pass what it could
// not see).
GuardVerdict judge_convergence(const TrialMetrics& candidate, const TrialMetrics& reference,
                               const GuardThresholds& thresholds = {});

}  // namespace acspeed::tuner
