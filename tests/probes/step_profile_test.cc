#include "acspeed/step_profile.h"

#include <gtest/gtest.h>

#include "acspeed/error.h"

namespace acspeed {
namespace {

TEST(StepProfile, ExposedCommunicationIsCommunicationNotCoveredByCompute) {
  StepTimeline t;
  t.window = {0, 100};
  t.compute = {{0, 60}, {90, 100}};
  t.comm = {{{40, 70}, 0}, {{65, 85}, 1}};
  t.buckets = {{0, 1000}, {1, 500}};
  const StepProfile p = profile_step(t);
  EXPECT_EQ(p.wall_ns, 100);
  EXPECT_EQ(p.compute_ns, 70);
  EXPECT_EQ(p.comm_ns, 45);          // [40, 85)
  EXPECT_EQ(p.exposed_comm_ns, 25);  // [60, 85)
  EXPECT_DOUBLE_EQ(p.overlap_ratio, 20.0 / 45.0);
  ASSERT_EQ(p.buckets.size(), 2u);
  EXPECT_EQ(p.buckets[0].index, 0);
  EXPECT_EQ(p.buckets[0].bytes, 1000);
  EXPECT_EQ(p.buckets[0].comm_ns, 30);
  EXPECT_EQ(p.buckets[1].comm_ns, 20);
}

TEST(StepProfile, SpansOutsideTheWindowAreClipped) {
  StepTimeline t;
  t.window = {100, 200};
  t.compute = {{50, 150}};
  t.comm = {{{180, 260}, 3}};
  const StepProfile p = profile_step(t);
  EXPECT_EQ(p.compute_ns, 50);
  EXPECT_EQ(p.comm_ns, 20);
  EXPECT_EQ(p.exposed_comm_ns, 20);
  ASSERT_EQ(p.buckets.size(), 1u);
  EXPECT_EQ(p.buckets[0].comm_ns, 20);
  EXPECT_EQ(p.buckets[0].bytes, 0);  // its launch was not seen
}

TEST(StepProfile, FullyHiddenCommunicationHasOverlapOneAndNoCommunicationHasOverlapZero) {
  StepTimeline hidden;
  hidden.window = {0, 100};
  hidden.compute = {{0, 100}};
  hidden.comm = {{{10, 30}, -1}};
  EXPECT_EQ(profile_step(hidden).exposed_comm_ns, 0);
  EXPECT_DOUBLE_EQ(profile_step(hidden).overlap_ratio, 1.0);

  StepTimeline none;
  none.window = {0, 100};
  none.compute = {{0, 100}};
  EXPECT_EQ(profile_step(none).comm_ns, 0);
  EXPECT_DOUBLE_EQ(profile_step(none).overlap_ratio, 0.0);
}

TEST(StepProfile, ANegativeBucketSizeIsRejectedWithItsValue) {
  StepTimeline t;
  t.window = {0, 10};
  t.buckets = {{2, -5}};
  try {
    profile_step(t);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("-5"), std::string::npos) << e.what();
  }
}

StepProfile make(int64_t wall, int64_t compute, int64_t comm, int64_t exposed, double overlap,
                 std::vector<BucketProfile> buckets = {}) {
  StepProfile p;
  p.wall_ns = wall;
  p.compute_ns = compute;
  p.comm_ns = comm;
  p.exposed_comm_ns = exposed;
  p.overlap_ratio = overlap;
  p.buckets = std::move(buckets);
  return p;
}

TEST(CombineRanks, EachStepTakesTheMaximumOverRanksPerMetricAndTheMinimumOverlap) {
  const std::vector<std::vector<StepProfile>> per_rank = {
      {make(100, 80, 30, 10, 0.66, {{0, 400, 20}}), make(50, 40, 10, 0, 1.0)},
      {make(120, 70, 40, 25, 0.37, {{0, 400, 35}, {1, 100, 5}}), make(45, 45, 5, 2, 0.6)},
  };
  const auto c = combine_ranks(per_rank);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].wall_ns, 120);
  EXPECT_EQ(c[0].compute_ns, 80);
  EXPECT_EQ(c[0].comm_ns, 40);
  EXPECT_EQ(c[0].exposed_comm_ns, 25);
  EXPECT_DOUBLE_EQ(c[0].overlap_ratio, 0.37);
  ASSERT_EQ(c[0].buckets.size(), 2u);
  EXPECT_EQ(c[0].buckets[0].comm_ns, 35);
  EXPECT_EQ(c[0].buckets[1].bytes, 100);
  EXPECT_EQ(c[1].wall_ns, 50);
  EXPECT_EQ(c[1].exposed_comm_ns, 2);
  EXPECT_DOUBLE_EQ(c[1].overlap_ratio, 0.6);
}

TEST(CombineRanks, DifferentStepCountsAreAnErrorNamingBothCounts) {
  try {
    combine_ranks({{make(1, 1, 0, 0, 0)}, {make(1, 1, 0, 0, 0), make(1, 1, 0, 0, 0)}});
    FAIL();
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("1 steps"), std::string::npos) << what;
    EXPECT_NE(what.find("has 2"), std::string::npos) << what;
  }
  EXPECT_TRUE(combine_ranks({}).empty());
}

}  // namespace
}  // namespace acspeed
