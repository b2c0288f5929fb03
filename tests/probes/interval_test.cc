#include "acspeed/interval.h"

#include <gtest/gtest.h>

#include "acspeed/error.h"

namespace acspeed {
namespace {

TEST(Interval, UniteMergesOverlappingAndTouchingSpansAndDropsEmptyOnes) {
  const IntervalSet u = unite({{30, 40}, {0, 10}, {5, 20}, {20, 25}, {50, 50}});
  EXPECT_EQ(u, (IntervalSet{{0, 25}, {30, 40}}));
  EXPECT_EQ(total_length(u), 35);
}

TEST(Interval, UniteRejectsASpanThatEndsBeforeItBegins) {
  try {
    unite({{10, 5}});
    FAIL() << "accepted a reversed span";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("[10, 5)"), std::string::npos) << e.what();
  }
}

TEST(Interval, IntersectKeepsOnlyTimeCoveredByBoth) {
  const IntervalSet a = unite({{0, 10}, {20, 30}});
  const IntervalSet b = unite({{5, 25}, {28, 40}});
  EXPECT_EQ(intersect(a, b), (IntervalSet{{5, 10}, {20, 25}, {28, 30}}));
  EXPECT_EQ(intersect(a, {}), IntervalSet{});
}

TEST(Interval, SubtractRemovesCoveredTimeIncludingHolesInsideASpan) {
  const IntervalSet a = unite({{0, 100}});
  const IntervalSet b = unite({{10, 20}, {30, 40}, {90, 120}});
  EXPECT_EQ(subtract(a, b), (IntervalSet{{0, 10}, {20, 30}, {40, 90}}));
  EXPECT_EQ(subtract(b, a), (IntervalSet{{100, 120}}));
  EXPECT_EQ(subtract(a, {}), a);
}

TEST(Interval, SubtractHandlesOneSpanOfBCoveringSeveralSpansOfA) {
  const IntervalSet a = unite({{0, 10}, {20, 30}, {40, 50}});
  EXPECT_EQ(subtract(a, unite({{5, 45}})), (IntervalSet{{0, 5}, {45, 50}}));
}

TEST(Interval, ClipRestrictsToTheWindowAndRejectsAReversedWindow) {
  const IntervalSet a = unite({{0, 10}, {20, 30}});
  EXPECT_EQ(clip(a, {5, 25}), (IntervalSet{{5, 10}, {20, 25}}));
  EXPECT_EQ(clip(a, {12, 12}), IntervalSet{});
  EXPECT_THROW(clip(a, {25, 5}), InvalidArgument);
}

TEST(Interval, CoverageIsTheLengthOfTheIntersection) {
  const IntervalSet comm = unite({{0, 10}, {20, 40}});
  const IntervalSet compute = unite({{5, 30}});
  EXPECT_EQ(coverage(comm, compute), 15);
  EXPECT_EQ(coverage(compute, comm), 15);
  EXPECT_EQ(total_length(comm) - coverage(comm, compute), total_length(subtract(comm, compute)));
}

}  // namespace
}  // namespace acspeed
