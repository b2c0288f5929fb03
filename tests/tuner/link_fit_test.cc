// The link fit: latency and bandwidth come back from timings made with known values.
#include "acspeed/tuner/link_fit.h"

#include <gtest/gtest.h>

namespace acspeed::tuner {
namespace {

constexpr double kLatency = 0.002;     // s per collective
constexpr double kBandwidth = 117e6;   // bytes/s

double exact(double collectives, double bytes) { return collectives * kLatency + bytes / kBandwidth; }

TEST(LinkFit, RecoversKnownLatencyAndBandwidthFromExactTimings) {
  std::vector<LinkSample> samples;
  for (double buckets : {1.0, 3.0, 10.0, 48.0}) {
    for (double bytes : {46.8e6, 23.4e6}) samples.push_back({buckets, bytes, exact(buckets, bytes)});
  }
  const auto fit = fit_link(samples);
  ASSERT_TRUE(fit);
  EXPECT_TRUE(fit->latency_fitted);
  EXPECT_NEAR(fit->latency_s, kLatency, 1e-9);
  EXPECT_NEAR(fit->bytes_per_s, kBandwidth, 1e-3 * kBandwidth / 1e3);
  EXPECT_LT(fit->rms_error_s, 1e-9);
  EXPECT_LT(fit->relative_error, 1e-9);
  EXPECT_EQ(fit->samples, samples.size());
}

TEST(LinkFit, RecoversThemWithinAFewPercentFromNoisyTimings) {
  std::vector<LinkSample> samples;
  const double noise[] = {0.03, -0.02, 0.01, -0.03, 0.02, -0.01, 0.0, 0.025};
  int k = 0;
  for (double buckets : {2.0, 5.0, 12.0, 40.0}) {
    for (double bytes : {46.8e6, 23.4e6}) {
      samples.push_back({buckets, bytes, exact(buckets, bytes) * (1 + noise[k++ % 8])});
    }
  }
  const auto fit = fit_link(samples);
  ASSERT_TRUE(fit);
  EXPECT_NEAR(fit->bytes_per_s, kBandwidth, 0.05 * kBandwidth);
  EXPECT_NEAR(fit->latency_s, kLatency, 0.5 * kLatency);
  EXPECT_GT(fit->rms_error_s, 0);
  EXPECT_GT(fit->relative_error, 0);
  EXPECT_LT(fit->relative_error, 0.05);  // 3% noise: the line explains the times
}

TEST(LinkFit, SamplesWithOneRatioOfCollectivesToBytesGiveTheBandwidthAlone) {
  // Every sample sends 10 MB per collective: latency and bandwidth cannot be told apart.
  const std::vector<LinkSample> samples = {{1, 10e6, 0.1}, {2, 20e6, 0.2}, {4, 40e6, 0.4}};
  const auto fit = fit_link(samples);
  ASSERT_TRUE(fit);
  EXPECT_FALSE(fit->latency_fitted);
  EXPECT_EQ(fit->latency_s, 0);
  EXPECT_NEAR(fit->bytes_per_s, 100e6, 1e-3);
}

TEST(LinkFit, ANegativeLatencyFromNoiseIsDroppedForABandwidthOnlyFit) {
  // More collectives took less time: the two-term fit would give a negative latency.
  const std::vector<LinkSample> samples = {{1, 10e6, 0.11}, {20, 10e6, 0.09}};
  const auto fit = fit_link(samples);
  ASSERT_TRUE(fit);
  EXPECT_FALSE(fit->latency_fitted);
  EXPECT_EQ(fit->latency_s, 0);
  EXPECT_NEAR(fit->bytes_per_s, 20e6 / 0.2, 1);
}

TEST(LinkFit, NoUsableSampleGivesNoFit) {
  EXPECT_FALSE(fit_link({}));
  EXPECT_FALSE(fit_link({{3, 0, 0.1}, {3, 1e6, 0}}));
}

}  // namespace
}  // namespace acspeed::tuner
