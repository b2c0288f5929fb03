// Search strategies: which point of the search space to measure next, given what was measured.
//
// A strategy is chosen at run time (`--strategy NAME`, default `auto`) from an ordered list; for
// `auto` the first implementation whose enabled() accepts the space wins (Horovod's op list):
//   model   - guided by the session's step model (the default for spaces of kDescentMinPoints
//             points or more); coordinate descent until the model can forecast
//   descent - coordinate descent
//   grid    - every point, in row-major order (always enabled)
//
// The model strategy (step_model.h): once the session's step model forecasts the points (a
// compute-only step, a link fit and the gradients' bytes are known), it measures the untried point
// with the lowest predicted step next (ties in a seeded order), skips points predicted slower than
// (1 + margin) x the best measured step, margin = prune_margin or the largest relative error of the
// model's own forecasts of the points measured so far, whichever is larger (re-judged after
// every trial, as the model learns; so noise the model cannot explain widens it),
// and stops when the best measured step is within (1 + stop_margin) x the lowest bound of any
// point: no config can be much faster (never once a measured step came out more than stop_margin
// below its own bound: the bounds then overestimate, and a config not measured yet may be faster). Points the model cannot forecast (a compression it has no
// byte model for, or a flow count no trial calibrated the link for) are measured before the forecast ones. Until the model forecasts (one node, no
// probe) it runs coordinate descent, keeping what descent measured. While the link fit leaves more
// than 10% of the communication times unexplained, or more flows show less bandwidth than fewer (a
// CPU-bound, loaded machine: step_model.h's links_consistent), it only orders.
//
// Why coordinate descent rather than successive halving or a model: a trial of a real DDP step is
// expensive (seconds) and noisy (+-10% between runs on a CPU), and the knobs act
// mostly independently - the bucket size sets how much overlap is possible, the algorithm and the
// streams how fast each bucket moves, compression how many bytes move. Along one knob the cost is
// smooth and usually unimodal. Coordinate descent measures each knob's values with the others held
// at the incumbent, moves only when a value is clearly better (by more than `min_gain`, so noise
// alone does not move it), and sweeps again in a fresh, seeded order until a sweep moves nothing.
// It needs sum(values per knob) trials per sweep instead of their product (1+3+2+... vs 4x3x3x2),
// and the second sweep catches interactions between knobs (e.g. small buckets only paying off with
// more streams). Successive halving would still measure every point once; a surrogate model needs
// more points than the handful of trials a ten-minute budget allows. Every measured point is
// cached, so a point is never measured twice.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "acspeed/tuner/search_space.h"
#include "acspeed/tuner/step_model.h"

namespace acspeed::tuner {

inline constexpr double kFailedCost = std::numeric_limits<double>::infinity();
inline constexpr size_t kDescentMinPoints = 5;

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  // The next point to measure; nullopt when the search is over. Called again only after report()
  // for the returned point.
  virtual std::optional<Point> next() = 0;
  // The cost (median step time, s; kFailedCost for a failed trial) of a point next() returned.
  virtual void report(const Point& point, double cost) = 0;
  // What the search decided beyond its measurements (points skipped, why it stopped); "" if nothing.
  virtual std::string summary() const { return ""; }
};

// The step model's view of a point.
struct Forecast {
  double step_s = 0;
  double bound_s = 0;
  // False when the model does not explain its own measurements well enough (step_model.h's
  // kReliableLinkError): the forecast still orders the points, but prunes and stops nothing.
  bool reliable = true;
};
// nullopt: the model cannot forecast this point (yet).
using ForecastFn = std::function<std::optional<Forecast>(const Point&)>;

// The step model's forecast of the space's points: predict() under `scenario` (default: the
// calibration link and nodes); nullopt where it cannot predict (among others, a config whose flow
// count no trial calibrated: step_model.h's flow_count_unmeasured), so the model strategy measures
// that point first; online tuning orders its candidates by it. `model` is read at each call, so the
// forecast learns as the caller recalibrates it: it must outlive the result.
ForecastFn model_forecast(const StepModel& model, const SearchSpace& space, const Scenario& scenario = {});

struct StrategyOptions {
  uint64_t seed = 0;       // orders the knobs of each descent sweep, and the model's ties
  double min_gain = 0.03;  // descent: move only for a cost below (1 - min_gain) x the incumbent's
  int max_sweeps = 3;      // descent: sweeps over all knobs at most
  ForecastFn forecast;         // model: the session's step model (empty: never forecasts)
  double prune_margin = 0.10;  // model: skip points predicted above (1 + margin) x the best measured
                               // (or the model's largest forecast error so far, when larger)
  double stop_margin = 0.05;   // model: stop when the best measured is within (1 + margin) x the lowest bound
  // descent: measures the values of the knob being swept in this forecast's order (lowest step first,
  // those it cannot forecast before any forecast one); empty: index order. Online tuning (online.h)
  // sets it: there the step model orders and prunes nothing.
  ForecastFn order_by;
};

struct StrategyInfo {
  std::string name;
  std::string summary;
  // Whether `auto` may pick it for this space on `nnodes` nodes (the step model forecasts only the
  // inter-node link: on one node `model` would never forecast and run coordinate descent instead).
  bool (*enabled)(const SearchSpace& space, int nnodes);
  std::unique_ptr<Strategy> (*make)(const SearchSpace& space, const StrategyOptions& options);
};

// The implementations in `auto` preference order.
const std::vector<StrategyInfo>& strategies();
// `name` = one of strategies() (resolve `auto` first); throws InvalidArgument naming the accepted names.
std::unique_ptr<Strategy> make_strategy(const std::string& name, const SearchSpace& space,
                                        const StrategyOptions& options);
// The name `auto` resolves to for this space on `nnodes` nodes (or `name` itself, after checking
// it): what the plan announces and the session runs.
std::string resolve_strategy_name(const std::string& name, const SearchSpace& space, int nnodes);

}  // namespace acspeed::tuner
