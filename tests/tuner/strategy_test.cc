#include "acspeed/tuner/strategy.h"

#include <cmath>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "acspeed/error.h"

namespace acspeed::tuner {
namespace {

SearchSpace big_space() {
  SearchSpace space;
  space.bucket_mb = {1, 5, 25, 100};
  space.algorithms = {Algorithm::kAllreduce, Algorithm::kReduceScatter, Algorithm::kHierarchical};
  space.streams = {1, 2, 4};
  space.compression = {Compression::kNone, Compression::kFp16};
  return space;  // 72 points
}

// A synthetic step time with a unique optimum at (5 MiB, hierarchical, 2 streams, fp16) and an
// interaction: more streams only pay off with small buckets.
double synthetic_cost(const SearchSpace& space, const Point& p) {
  const double bucket = space.bucket_mb[p[0]];
  const int streams = space.streams[p[2]];
  double cost = 1.0;
  cost += 0.05 * std::pow(std::log(bucket / 5.0), 2);
  cost += p[1] == 2 ? 0.0 : p[1] == 1 ? 0.08 : 0.15;
  cost += 0.04 * std::abs(streams - 2);
  if (bucket >= 25 && streams > 1) cost += 0.1;
  cost += p[3] == 1 ? 0.0 : 0.2;
  return cost;
}

struct RunResult {
  Point best;
  double best_cost = kFailedCost;
  size_t trials = 0;
  std::set<Point> seen;
  bool repeated = false;
};

RunResult run(Strategy& strategy, const SearchSpace& space, const std::function<double(const Point&)>& cost) {
  RunResult r;
  while (auto p = strategy.next()) {
    const double c = cost(*p);
    r.repeated |= !r.seen.insert(*p).second;
    ++r.trials;
    if (c < r.best_cost) {
      r.best_cost = c;
      r.best = *p;
    }
    strategy.report(*p, c);
    EXPECT_LE(r.trials, space.size()) << "never more trials than the grid";
    if (r.trials > space.size()) break;
  }
  return r;
}

Point grid_optimum(const SearchSpace& space) {
  Point best;
  double best_cost = kFailedCost;
  for (size_t i = 0; i < space.size(); ++i) {
    const double c = synthetic_cost(space, space.point_at(i));
    if (c < best_cost) {
      best_cost = c;
      best = space.point_at(i);
    }
  }
  return best;
}

TEST(Strategy, GridEnumeratesEveryPointOnce) {
  const SearchSpace space = big_space();
  auto grid = make_strategy("grid", space, {});
  EXPECT_EQ(grid->name(), "grid");
  const auto r = run(*grid, space, [&](const Point& p) { return synthetic_cost(space, p); });
  EXPECT_EQ(r.trials, space.size());
  EXPECT_EQ(r.seen.size(), space.size());
  EXPECT_EQ(r.best, grid_optimum(space));
}

TEST(Strategy, DescentFindsTheGridOptimumWithFarFewerTrials) {
  const SearchSpace space = big_space();
  for (uint64_t seed : {1, 2, 3, 42, 1234}) {
    StrategyOptions options;
    options.seed = seed;
    auto descent = make_strategy("auto", space, options);
    EXPECT_EQ(descent->name(), "descent");
    const auto r = run(*descent, space, [&](const Point& p) { return synthetic_cost(space, p); });
    EXPECT_EQ(r.best, grid_optimum(space)) << "seed " << seed;
    EXPECT_FALSE(r.repeated) << "a measured point is never measured again";
    EXPECT_LE(r.trials, space.size() / 3) << "seed " << seed << ": " << r.trials << " trials";
  }
}

TEST(Strategy, DescentIgnoresGainsWithinTheNoiseMargin) {
  SearchSpace space;
  space.bucket_mb = {5, 25, 100};
  space.streams = {1, 2};
  StrategyOptions options;
  options.min_gain = 0.05;
  auto descent = make_strategy("descent", space, options);
  const Point start = space.default_point();
  // Every other point is 2% faster than the start: noise, not a reason to move. The strategy ends
  // with the start as its incumbent, which the tuner then keeps (DDP defaults).
  std::vector<Point> order;
  while (auto p = descent->next()) {
    order.push_back(*p);
    descent->report(*p, *p == start ? 1.0 : 0.98);
  }
  EXPECT_EQ(order.front(), start);
  EXPECT_EQ(order.size(), 4u);  // start + 2 other buckets + 1 other stream count, one sweep
}

TEST(Strategy, DescentMovesAwayFromAFailedStart) {
  SearchSpace space;
  space.bucket_mb = {5, 25, 100};
  space.algorithms = {Algorithm::kAllreduce, Algorithm::kReduceScatter};
  auto descent = make_strategy("descent", space, {});
  size_t trials = 0;
  std::map<Point, double> costs;
  while (auto p = descent->next()) {
    const double c = space.bucket_mb[(*p)[0]] == 25 ? kFailedCost : 1.0 + 0.1 * (*p)[1] + 0.01 * (*p)[0];
    costs[*p] = c;
    descent->report(*p, c);
    ++trials;
  }
  // The best measured point was found: 5 MiB allreduce.
  Point expected = space.default_point();
  expected[0] = 0;
  expected[1] = 0;
  ASSERT_TRUE(costs.count(expected));
  EXPECT_LT(trials, space.size() + 1);
}

TEST(Strategy, AutoPicksGridForTinySpacesAndUnknownNamesAreErrors) {
  SearchSpace space;
  space.bucket_mb = {5, 25};
  EXPECT_EQ(resolve_strategy_name("auto", space), "grid");
  EXPECT_EQ(resolve_strategy_name("auto", big_space()), "descent");
  try {
    make_strategy("anneal", space, {});
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'anneal'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("grid"), std::string::npos);
  }
}

}  // namespace
}  // namespace acspeed::tuner
