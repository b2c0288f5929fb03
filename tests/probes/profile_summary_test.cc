#include "acspeed/profile_summary.h"

#include <gtest/gtest.h>

#include "acspeed/error.h"

namespace acspeed {
namespace {

TEST(Percentile, InterpolatesLinearlyBetweenNearestRanks) {
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5}, 75), 4.0);
  EXPECT_DOUBLE_EQ(percentile({10, 20}, 95), 19.5);
  EXPECT_DOUBLE_EQ(percentile({7}, 90), 7.0);
  EXPECT_DOUBLE_EQ(percentile({1, 9}, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile({1, 9}, 100), 9.0);
}

TEST(Percentile, RejectsEmptyInputAndOutOfRangePercentiles) {
  EXPECT_THROW(percentile({}, 50), InvalidArgument);
  EXPECT_THROW(percentile({1}, 101), InvalidArgument);
  EXPECT_THROW(percentile({1}, -1), InvalidArgument);
}

std::vector<StepProfile> steps_with_walls(std::vector<int64_t> walls_ms) {
  std::vector<StepProfile> out;
  for (int64_t w : walls_ms) {
    StepProfile p;
    p.wall_ns = w * 1000000;
    p.compute_ns = p.wall_ns / 2;
    p.comm_ns = p.wall_ns / 4;
    p.exposed_comm_ns = p.wall_ns / 10;
    p.overlap_ratio = 0.6;
    p.buckets = {{0, 25 << 20, 2000000}};
    out.push_back(p);
  }
  return out;
}

TEST(Summarize, ReportsEachRequestedPercentileOfEachMetric) {
  SummaryOptions options;
  options.ranks = 2;
  options.backend = "cpu";
  const ProfileSummary s = summarize(steps_with_walls({10, 20, 30, 40, 50}), options);
  EXPECT_EQ(s.steps, 5);
  ASSERT_EQ(s.rows.size(), 4u);
  EXPECT_DOUBLE_EQ(s.rows[0].percentile, 50);
  EXPECT_NEAR(s.rows[0].wall_s, 0.030, 1e-12);
  EXPECT_NEAR(s.rows[0].exposed_comm_s, 0.003, 1e-12);
  EXPECT_NEAR(s.rows[1].wall_s, 0.040, 1e-12);
  EXPECT_NEAR(s.rows[3].wall_s, 0.048, 1e-12);
  ASSERT_EQ(s.buckets.size(), 1u);
  EXPECT_EQ(s.buckets[0].bytes, 25 << 20);
  EXPECT_NEAR(s.buckets[0].comm_s_p50, 0.002, 1e-12);
  EXPECT_EQ(s.buckets[0].steps, 5);
}

TEST(Summarize, NoStepsIsAnError) { EXPECT_THROW(summarize({}), InvalidArgument); }

TEST(FormatSummary, OneTableWithUnitsInTheHeaderAndTheCombinationRule) {
  SummaryOptions options;
  options.ranks = 2;
  options.backend = "cpu";
  const std::string text = format_summary(summarize(steps_with_walls({10, 20, 30}), options));
  EXPECT_NE(text.find("probe: cpu, 2 ranks, 3 steps"), std::string::npos) << text;
  EXPECT_NE(text.find("max over ranks"), std::string::npos) << text;
  EXPECT_NE(text.find("wall(ms)"), std::string::npos) << text;
  EXPECT_NE(text.find("exposed(ms)"), std::string::npos) << text;
  EXPECT_NE(text.find("p95"), std::string::npos) << text;
  EXPECT_NE(text.find("20.000"), std::string::npos) << text;  // p50 wall
  EXPECT_NE(text.find("25.00"), std::string::npos) << text;   // bucket size in MiB
}

}  // namespace
}  // namespace acspeed
