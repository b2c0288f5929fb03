// The convergence guard on measured figures: the fixtures, the fidelity thresholds, and a
// trial the guard could not see.
#include "acspeed/tuner/convergence_guard.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace acspeed::tuner {
namespace {

TrialMetrics trial(std::vector<double> losses, double cosine = 0.99, double norm_error = 0.02) {
  TrialMetrics m;
  m.trajectory = std::move(losses);
  m.fidelity_cosine = cosine;
  m.fidelity_norm_error = norm_error;
  m.fidelity_steps = 6;
  return m;
}

TEST(ConvergenceGuard, TenTimesTheUncompressedFinalLossFailsEvenFromAHighStart) {
  // The case the old relative-to-progress check let through: 7.08 -> 0.0406 uncompressed, 0.39 compressed.
  const auto v = judge_convergence(trial({7.08, 0.39}), trial({7.08, 0.0406}));
  EXPECT_FALSE(v.passed);
  EXPECT_NE(v.reason.find("loss over the last steps 0.39 vs 0.0406"), std::string::npos) << v.reason;
  EXPECT_EQ(v.evidence["loss"]["passed"], false);
  EXPECT_EQ(v.evidence["fidelity"]["passed"], true);
}

TEST(ConvergenceGuard, ASmallExcessOverTheUncompressedLossPasses) {
  const auto v = judge_convergence(trial({7.08, 0.0450}), trial({7.08, 0.0406}));
  EXPECT_TRUE(v.passed) << v.reason;
  EXPECT_EQ(v.evidence["passed"], true);
  EXPECT_NEAR(v.evidence["loss"]["excess"].get<double>(), 0.0044, 1e-9);
  EXPECT_NEAR(v.evidence["loss"]["allowed"].get<double>(), 0.01 * (7.08 - 0.0406), 1e-9);
}

TEST(ConvergenceGuard, TheTailIsTheLastQuarterOfTheStepsBothRan) {
  // 8 common steps: the tail is the last 2; the candidate's extra steps are not compared.
  const LossCheck c = check_loss_trajectory({5, 4, 3, 2, 1, 1, 1.0, 1.2, 9, 9}, {5, 4, 3, 2, 1, 1, 1.0, 1.0}, {});
  EXPECT_EQ(c.steps_compared, 8);
  EXPECT_DOUBLE_EQ(c.candidate_tail, 1.1);
  EXPECT_DOUBLE_EQ(c.reference_tail, 1.0);
  EXPECT_TRUE(c.passed);  // 0.1 <= 0.25 x 1.0
  EXPECT_FALSE(check_loss_trajectory({5, 2, 2}, {5, 1, 1}, {}).passed);
  EXPECT_TRUE(check_loss_trajectory({5, 0.5, 0.5}, {5, 1, 1}, {}).passed);  // lower is fine
}

TEST(ConvergenceGuard, AFailureWithinTheNoiseOfTheTailsDifferenceIsMarkedSo) {
  // 12 steps, a tail of 3: per-step differences 0.2, 0.5, 0.2 (excess 0.3, allowed 0.25 x 1.0); around
  // their line (flat) the residuals -0.1, 0.2, -0.1 give a standard error sqrt(0.06 / 1 / 3) = 0.1414:
  // 0.05 over the allowance is within 2x that.
  const std::vector<double> start{5, 4, 3, 2, 1, 1, 1, 1, 1};
  const auto with_tail = [&start](std::vector<double> tail) {
    std::vector<double> losses = start;
    losses.insert(losses.end(), tail.begin(), tail.end());
    return losses;
  };
  const std::vector<double> reference = with_tail({1, 1, 1});
  const LossCheck near = check_loss_trajectory(with_tail({1.2, 1.5, 1.2}), reference, {});
  EXPECT_FALSE(near.passed);
  EXPECT_NEAR(near.excess, 0.3, 1e-12);
  EXPECT_NEAR(near.noise, std::sqrt(0.02), 1e-12);
  EXPECT_TRUE(near.within_noise);
  // 0.45 over it (differences 0.6, 0.9, 0.6: the same noise): a failure the T steps decide
  const LossCheck far = check_loss_trajectory(with_tail({1.6, 1.9, 1.6}), reference, {});
  EXPECT_NEAR(far.noise, std::sqrt(0.02), 1e-12);
  EXPECT_FALSE(far.within_noise);
  GuardThresholds wide;
  wide.undecided_z = 5;
  EXPECT_TRUE(check_loss_trajectory(with_tail({1.6, 1.9, 1.6}), reference, wide).within_noise);
  // a difference on a straight line (0.1, 0.3, 0.5) has no noise: its trend decides
  const LossCheck trend = check_loss_trajectory(with_tail({1.1, 1.3, 1.5}), reference, {});
  EXPECT_NEAR(trend.noise, 0, 1e-12);
  EXPECT_FALSE(trend.within_noise);
  EXPECT_FALSE(check_loss_trajectory(with_tail({1.0, 1.2, 1.0}), reference, {}).within_noise);  // passed
  EXPECT_FALSE(check_loss_trajectory({5, 2, 2}, {5, 1, 1}, {}).within_noise);  // a tail of one step: no noise

  // The verdict: undecided on the loss alone, never when the gradient fidelity failed too.
  const auto v = judge_convergence(trial(with_tail({1.2, 1.5, 1.2})), trial(reference));
  EXPECT_FALSE(v.passed);
  EXPECT_TRUE(v.loss_undecided);
  EXPECT_EQ(v.evidence["loss"]["within_noise"], true);
  EXPECT_NEAR(v.evidence["loss"]["noise"].get<double>(), std::sqrt(0.02), 1e-12);
  EXPECT_FALSE(judge_convergence(trial(with_tail({1.2, 1.5, 1.2}), 0.3), trial(reference)).loss_undecided);
  EXPECT_FALSE(judge_convergence(trial(with_tail({1.6, 1.9, 1.6})), trial(reference)).loss_undecided);
}

TEST(ConvergenceGuard, LowFidelityFailsWithItsFigures) {
  const auto corrupt = judge_convergence(trial({7, 1}, -0.2, 0.9), trial({7, 1}));
  EXPECT_FALSE(corrupt.passed);
  EXPECT_NE(corrupt.reason.find("cosine -0.2000 (needs >= 0.7)"), std::string::npos) << corrupt.reason;
  const auto off_norm = judge_convergence(trial({7, 1}, 0.99, 0.5), trial({7, 1}));
  EXPECT_FALSE(off_norm.passed);
  EXPECT_NE(off_norm.reason.find("norm error 0.5000 (needs <= 0.45)"), std::string::npos) << off_norm.reason;
}

TEST(ConvergenceGuard, WhatTheGuardCouldNotSeeFails) {
  TrialMetrics unmeasured;
  unmeasured.trajectory = {7, 1};
  const auto v = judge_convergence(unmeasured, trial({7, 1}));
  EXPECT_FALSE(v.passed);
  EXPECT_NE(v.reason.find("no gradient-fidelity figures"), std::string::npos) << v.reason;
  const auto no_losses = judge_convergence(trial({}), trial({7, 1}));
  EXPECT_NE(no_losses.reason.find("no loss trajectory"), std::string::npos) << no_losses.reason;
  EXPECT_FALSE(judge_convergence(trial({7, NAN}), trial({7, 1})).passed);
}

}  // namespace
}  // namespace acspeed::tuner
