// Search strategies: which point of the search space to measure next, given what was measured.
//
// A strategy is chosen at run time (`--strategy NAME`, default `auto`) from an ordered list; for
// `auto` the first implementation whose enabled() accepts the space wins (Horovod's op list):
//   descent - coordinate descent (the default for spaces of more than kDescentMinPoints points)
//   grid    - every point, in row-major order (always enabled)
//
// Why coordinate descent rather than successive halving or a model: a trial of a real DDP step is
// expensive (seconds) and noisy (+-10% between runs on a CPU, see DESIGN.md), and the knobs act
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
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "acspeed/tuner/search_space.h"

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
};

struct StrategyOptions {
  uint64_t seed = 0;       // orders the knobs of each descent sweep
  double min_gain = 0.03;  // descent: move only for a cost below (1 - min_gain) x the incumbent's
  int max_sweeps = 3;      // descent: sweeps over all knobs at most
};

struct StrategyInfo {
  std::string name;
  std::string summary;
  bool (*enabled)(const SearchSpace& space);
  std::unique_ptr<Strategy> (*make)(const SearchSpace& space, const StrategyOptions& options);
};

// The implementations in `auto` preference order.
const std::vector<StrategyInfo>& strategies();
// `name` = auto or one of strategies(); throws InvalidArgument naming the accepted names.
std::unique_ptr<Strategy> make_strategy(const std::string& name, const SearchSpace& space,
                                        const StrategyOptions& options);
// The name `auto` resolves to for this space (or `name` itself, after checking it).
std::string resolve_strategy_name(const std::string& name, const SearchSpace& space);

}  // namespace acspeed::tuner
