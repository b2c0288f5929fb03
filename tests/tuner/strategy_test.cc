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
    auto descent = make_strategy("descent", space, options);
    EXPECT_EQ(descent->name(), "descent");
    const auto r = run(*descent, space, [&](const Point& p) { return synthetic_cost(space, p); });
    EXPECT_EQ(r.best, grid_optimum(space)) << "seed " << seed;
    EXPECT_FALSE(r.repeated) << "a measured point is never measured again";
    EXPECT_LE(r.trials, space.size() / 3) << "seed " << seed << ": " << r.trials << " trials";
  }
}

// A step model that knows the synthetic cost up to a constant error, with a bound below the optimum.
StrategyOptions forecasting(const SearchSpace& space, double error, double bound_share, uint64_t seed = 1) {
  StrategyOptions options;
  options.seed = seed;
  const double optimum = synthetic_cost(space, grid_optimum(space));
  options.forecast = [space, error, bound_share, optimum](const Point& p) -> std::optional<Forecast> {
    return Forecast{synthetic_cost(space, p) * (1 + error), optimum * bound_share};
  };
  return options;
}

TEST(Strategy, ModelWithoutAForecastRunsCoordinateDescent) {
  const SearchSpace space = big_space();
  StrategyOptions options;
  options.seed = 3;
  auto model = make_strategy("model", space, options);
  auto descent = make_strategy("descent", space, options);
  const auto m = run(*model, space, [&](const Point& p) { return synthetic_cost(space, p); });
  const auto d = run(*descent, space, [&](const Point& p) { return synthetic_cost(space, p); });
  EXPECT_EQ(m.seen, d.seen);
  EXPECT_EQ(m.best, grid_optimum(space));
  EXPECT_NE(model->summary().find("coordinate descent"), std::string::npos) << model->summary();
}

TEST(Strategy, ModelMeasuresTheLowestPredictedFirstAndPrunesClearlySlowerPoints) {
  const SearchSpace space = big_space();
  for (uint64_t seed : {1, 2, 42}) {
    auto model = make_strategy("model", space, forecasting(space, 0.02, 0.5, seed));
    std::vector<Point> order;
    const auto r = run(*model, space, [&](const Point& p) {
      order.push_back(p);
      return synthetic_cost(space, p);
    });
    ASSERT_GE(order.size(), 2u);
    EXPECT_EQ(order[0], space.default_point()) << "DDP's defaults are measured first";
    EXPECT_EQ(order[1], grid_optimum(space)) << "then the lowest predicted step";
    EXPECT_EQ(r.best, grid_optimum(space));
    EXPECT_FALSE(r.repeated);
    // Only points predicted within 10% of the best measured (1.0) are measured: cost <= 1.1 / 1.02.
    for (const auto& p : r.seen) {
      if (p != space.default_point()) {
        EXPECT_LE(synthetic_cost(space, p) * 1.02, 1.1 + 1e-12);
      }
    }
    EXPECT_LT(r.trials, 20u);
    EXPECT_NE(model->summary().find("predicted more than 10% slower"), std::string::npos) << model->summary();
  }
}

TEST(Strategy, ModelStopsWhenTheBestMeasuredIsWithinTheMarginOfTheBound) {
  const SearchSpace space = big_space();
  // The bound is 3% below the optimum: once the optimum is measured nothing can be 5% faster.
  auto model = make_strategy("model", space, forecasting(space, 0.0, 0.97));
  const auto r = run(*model, space, [&](const Point& p) { return synthetic_cost(space, p); });
  EXPECT_EQ(r.trials, 2u);
  EXPECT_EQ(r.best, grid_optimum(space));
  EXPECT_NE(model->summary().find("within 5% of the lowest bound"), std::string::npos) << model->summary();
}

TEST(Strategy, ModelNeverStopsAtABoundThatAMeasuredStepBeat) {
  const SearchSpace space = big_space();
  // The "bound" is 10% above the optimum (as when a config's own compute cost is over-counted): the
  // optimum's step lies 9% below it, so nothing says the configs not measured yet cannot be faster.
  auto model = make_strategy("model", space, forecasting(space, 0.0, 1.10));
  const auto r = run(*model, space, [&](const Point& p) { return synthetic_cost(space, p); });
  EXPECT_GT(r.trials, 2u) << "no stop at the beaten bound";
  EXPECT_EQ(r.best, grid_optimum(space));
  EXPECT_EQ(model->summary().find("within 5% of the lowest bound"), std::string::npos) << model->summary();
  EXPECT_NE(model->summary().find("more than 5% below its bound"), std::string::npos) << model->summary();
  EXPECT_NE(model->summary().find("predicted more than 10% slower"), std::string::npos)
      << "pruning by predicted steps still works: " << model->summary();
}

TEST(Strategy, ModelWhoseFitIsUnreliableOrdersButNeverPrunesOrStops) {
  const SearchSpace space = big_space();
  StrategyOptions options = forecasting(space, 0.0, 0.97);
  const auto inner = options.forecast;
  options.forecast = [inner](const Point& p) -> std::optional<Forecast> {
    auto f = inner(p);
    f->reliable = false;
    return f;
  };
  auto model = make_strategy("model", space, options);
  std::vector<Point> order;
  const auto r = run(*model, space, [&](const Point& p) {
    order.push_back(p);
    return synthetic_cost(space, p);
  });
  EXPECT_EQ(r.trials, space.size()) << "nothing pruned, no stop near the bound";
  EXPECT_EQ(order[1], grid_optimum(space)) << "still ordered by the forecast";
  EXPECT_NE(model->summary().find("pruning none"), std::string::npos) << model->summary();
}

TEST(Strategy, ModelMeasuresPointsItCannotForecastBeforeTheOthers) {
  const SearchSpace space = big_space();
  StrategyOptions options = forecasting(space, 0.0, 0.5);
  const auto inner = options.forecast;
  // fp16 points (compression index 1) have no forecast.
  options.forecast = [inner](const Point& p) -> std::optional<Forecast> {
    if (p[3] == 1) return std::nullopt;
    return inner(p);
  };
  auto model = make_strategy("model", space, options);
  std::vector<Point> order;
  run(*model, space, [&](const Point& p) {
    order.push_back(p);
    return synthetic_cost(space, p);
  });
  const size_t fp16_points = space.size() / 2;
  ASSERT_GT(order.size(), fp16_points);
  for (size_t i = 1; i <= fp16_points; ++i) EXPECT_EQ(order[i][3], 1u) << "trial " << i;
}

TEST(Strategy, DescentOrderedByAForecastMeasuresEachKnobsValuesUnforecastFirstThenLowestStep) {
  SearchSpace space;
  space.bucket_mb = {1, 5, 25, 100};
  // Forecast: larger buckets faster, except 5 MiB, which it cannot forecast.
  StrategyOptions options;
  options.order_by = [&](const Point& p) -> std::optional<Forecast> {
    if (space.bucket_mb[p[0]] == 5) return std::nullopt;
    return Forecast{1.0 / space.bucket_mb[p[0]], 0, false};
  };
  auto descent = make_strategy("descent", space, options);
  std::vector<double> order;
  while (auto p = descent->next()) {
    order.push_back(space.bucket_mb[(*p)[0]]);
    descent->report(*p, 1.0);
  }
  EXPECT_EQ(order, (std::vector<double>{25, 5, 100, 1}));  // the start, then the knob's values
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
  EXPECT_EQ(resolve_strategy_name("auto", space, 2), "grid");
  EXPECT_EQ(resolve_strategy_name("auto", big_space(), 2), "model");
  // One node has no inter-node link for the step model to forecast: coordinate descent runs, and
  // the plan says so (it names what resolve_strategy_name returns).
  EXPECT_EQ(resolve_strategy_name("auto", big_space(), 1), "descent");
  EXPECT_EQ(resolve_strategy_name("model", big_space(), 1), "model") << "a strategy named is run";
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
