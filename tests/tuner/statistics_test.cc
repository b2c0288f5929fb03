#include "acspeed/tuner/statistics.h"

#include <cmath>

#include <gtest/gtest.h>

#include "acspeed/error.h"

namespace acspeed::tuner {
namespace {

TEST(Statistics, PercentileInterpolatesLikeNumpy) {
  // numpy.percentile([1, 2, 3, 4], [0, 25, 50, 90, 100]) = 1, 1.75, 2.5, 3.7, 4
  const std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(v, 25), 1.75);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);
  EXPECT_NEAR(percentile(v, 90), 3.7, 1e-12);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4.0);
  EXPECT_DOUBLE_EQ(median({5}), 5.0);
}

TEST(Statistics, PercentileRejectsEmptyAndOutOfRange) {
  EXPECT_THROW(percentile({}, 50), InvalidArgument);
  EXPECT_THROW(percentile({1, 2}, 101), InvalidArgument);
  EXPECT_THROW(percentile({1, 2}, -1), InvalidArgument);
}

TEST(Statistics, StudentTIntervalMatchesKnownValues) {
  // values 1..5: mean 3, sd sqrt(2.5), t_{0.975,4} = 2.776 -> half width 2.776 * 1.5811 / sqrt(5) = 1.9630
  const Interval i = t_interval_95({1, 2, 3, 4, 5});
  EXPECT_DOUBLE_EQ(i.estimate, 3.0);
  EXPECT_NEAR(i.low, 3.0 - 1.96296, 1e-4);
  EXPECT_NEAR(i.high, 3.0 + 1.96296, 1e-4);
  EXPECT_DOUBLE_EQ(t_critical_95(1), 12.706);
  EXPECT_DOUBLE_EQ(t_critical_95(30), 2.042);
  EXPECT_NEAR(t_critical_95(1000000), 1.960, 1e-3);
  EXPECT_THROW(t_interval_95({1}), InvalidArgument);
}

TEST(Statistics, BootstrapIsSeededAndBracketsTheMean) {
  const std::vector<double> v = {0.913, 1.107, 1.0031, 1.2017, 0.7929, 1.0511, 0.9312};
  const Interval a = bootstrap_interval_95(v, 42);
  const Interval b = bootstrap_interval_95(v, 42);
  const Interval c = bootstrap_interval_95(v, 7);
  EXPECT_DOUBLE_EQ(a.low, b.low);
  EXPECT_DOUBLE_EQ(a.high, b.high);
  EXPECT_TRUE(a.low != c.low || a.high != c.high);  // another seed draws other resamples
  EXPECT_NEAR(a.estimate, 1.0, 1e-12);
  EXPECT_LT(a.low, 1.0);
  EXPECT_GT(a.high, 1.0);
  // The bootstrap interval of a mean is close to the normal one: mean +- 1.96 sd / sqrt(n) = +-0.0989.
  EXPECT_NEAR(a.low, 1.0 - 0.0989, 0.03);
  EXPECT_NEAR(a.high, 1.0 + 0.0989, 0.03);
  // A constant sample has a zero-width interval.
  const Interval d = bootstrap_interval_95({2, 2, 2}, 1);
  EXPECT_DOUBLE_EQ(d.low, 2.0);
  EXPECT_DOUBLE_EQ(d.high, 2.0);
}

TEST(Statistics, PairedSpeedupAcceptsAClearWin) {
  // Baseline medians 2.0, 2.1, 1.9; candidate medians 1.0, 1.0, 1.0 -> speedups 2.0, 2.1, 1.9.
  const auto r = paired_speedup({{1.0, 0.9, 1.1}, {1.0, 1.0, 1.0}, {0.95, 1.0, 1.05}},
                                {{2.0, 2.0, 2.0}, {2.1, 2.0, 2.2}, {1.9, 1.9, 1.9}}, IntervalMethod::kStudentT, 1);
  ASSERT_EQ(r.speedups.size(), 3u);
  EXPECT_DOUBLE_EQ(r.speedups[0], 2.0);
  EXPECT_DOUBLE_EQ(r.speedups[1], 2.1);
  EXPECT_DOUBLE_EQ(r.speedups[2], 1.9);
  const double geo = std::cbrt(2.0 * 2.1 * 1.9);
  EXPECT_NEAR(r.speedup, geo, 1e-12);
  EXPECT_GT(r.ci_low, 1.0);
  EXPECT_TRUE(r.accepted);
  // Known interval: logs of 2.0, 2.1, 1.9 have sd 0.05006; half width 4.303 * 0.05006 / sqrt(3) = 0.12437.
  EXPECT_NEAR(std::log(r.ci_low), std::log(geo) - 0.12437, 1e-4);
  EXPECT_NEAR(std::log(r.ci_high), std::log(geo) + 0.12437, 1e-4);
}

TEST(Statistics, PairedSpeedupRejectsNoiseAroundOne) {
  const auto r = paired_speedup({{1.0}, {1.2}, {0.9}, {1.1}}, {{1.1}, {1.0}, {1.0}, {1.0}},
                                IntervalMethod::kStudentT, 1);
  EXPECT_LT(r.ci_low, 1.0);
  EXPECT_FALSE(r.accepted);
  const auto b = paired_speedup({{1.0}, {1.2}, {0.9}, {1.1}}, {{1.1}, {1.0}, {1.0}, {1.0}},
                                IntervalMethod::kBootstrap, 1);
  EXPECT_FALSE(b.accepted);
  EXPECT_THROW(paired_speedup({{1.0}}, {{1.0}}, IntervalMethod::kStudentT, 1), InvalidArgument);
}

TEST(Statistics, CompressedLossMustStayWithinToleranceAndFinite) {
  EXPECT_TRUE(loss_within_tolerance(2.05, 2.0, 0.05));
  EXPECT_TRUE(loss_within_tolerance(1.95, 2.0, 0.05));
  EXPECT_FALSE(loss_within_tolerance(2.2, 2.0, 0.05));
  EXPECT_FALSE(loss_within_tolerance(std::nan(""), 2.0, 0.05));
  EXPECT_FALSE(loss_within_tolerance(INFINITY, 2.0, 0.05));
  EXPECT_TRUE(loss_within_tolerance(0.0, 0.0, 0.0));
}

TEST(Statistics, LossToleranceScalesWithTheTrialsProgress) {
  // Measured on the emulated cluster: 7.08 -> 0.0406 uncompressed, 0.0450 with fp16: the same training.
  EXPECT_FALSE(loss_within_tolerance(0.0450, 0.0406, 0.05));
  EXPECT_TRUE(loss_within_tolerance(0.0450, 0.0406, 0.05, 7.08));
  // A compressed run that stopped learning differs by most of the progress.
  EXPECT_FALSE(loss_within_tolerance(6.9, 0.0406, 0.05, 7.08));
  // Little progress: the final loss stays the scale.
  EXPECT_FALSE(loss_within_tolerance(6.60, 6.95, 0.05, 7.0));
  EXPECT_TRUE(loss_within_tolerance(6.90, 6.95, 0.05, 7.0));
  EXPECT_FALSE(loss_within_tolerance(0.0450, 0.0406, 0.05, std::nan("")));
}

}  // namespace
}  // namespace acspeed::tuner
