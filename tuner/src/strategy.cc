#include "acspeed/tuner/strategy.h"

#include <algorithm>
#include <deque>
#include <map>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "acspeed/error.h"

namespace acspeed::tuner {
namespace {

class GridStrategy : public Strategy {
 public:
  explicit GridStrategy(const SearchSpace& space) : space_(space) {}
  std::string name() const override { return "grid"; }
  std::optional<Point> next() override {
    if (next_ >= space_.size()) return std::nullopt;
    return space_.point_at(next_++);
  }
  void report(const Point&, double) override {}

 private:
  SearchSpace space_;
  size_t next_ = 0;
};

class DescentStrategy : public Strategy {
 public:
  DescentStrategy(const SearchSpace& space, const StrategyOptions& options)
      : dims_(space.dims()), options_(options), generator_(options.seed), incumbent_(space.default_point()) {
    pending_.push_back(incumbent_);
  }
  std::string name() const override { return "descent"; }

  std::optional<Point> next() override {
    while (pending_.empty()) {
      if (!advance()) return std::nullopt;
    }
    return pending_.front();
  }

  void report(const Point& point, double cost) override {
    ACS_ENFORCE(!pending_.empty() && pending_.front() == point, "report() for the point next() returned");
    pending_.pop_front();
    measured_[point] = cost;
  }

 private:
  // Closes the knob being swept (moving the incumbent when a value is clearly better) and queues
  // the next knob's unmeasured values; false when the search is over.
  bool advance() {
    if (knob_ >= 0) close_knob(static_cast<size_t>(knob_));
    if (order_.empty()) {
      if (sweeps_ > 0 && !moved_in_sweep_) return false;
      if (sweeps_ == options_.max_sweeps) return false;
      for (size_t k = 0; k < dims_.size(); ++k) {
        if (dims_[k] > 1) order_.push_back(k);
      }
      if (order_.empty()) return false;
      std::shuffle(order_.begin(), order_.end(), generator_);
      ++sweeps_;
      moved_in_sweep_ = false;
    }
    knob_ = static_cast<int>(order_.front());
    order_.pop_front();
    for (size_t v = 0; v < dims_[static_cast<size_t>(knob_)]; ++v) {
      Point p = incumbent_;
      p[static_cast<size_t>(knob_)] = v;
      if (!measured_.count(p)) pending_.push_back(p);
    }
    return true;
  }

  void close_knob(size_t knob) {
    const double incumbent_cost = measured_.at(incumbent_);
    Point best = incumbent_;
    double best_cost = incumbent_cost;
    for (size_t v = 0; v < dims_[knob]; ++v) {
      Point p = incumbent_;
      p[knob] = v;
      const double cost = measured_.at(p);
      if (cost < best_cost) {
        best = p;
        best_cost = cost;
      }
    }
    const bool incumbent_failed = incumbent_cost == kFailedCost;
    if (best != incumbent_ && (incumbent_failed || best_cost < (1.0 - options_.min_gain) * incumbent_cost)) {
      incumbent_ = best;
      moved_in_sweep_ = true;
    }
  }

  std::vector<size_t> dims_;
  StrategyOptions options_;
  std::mt19937_64 generator_;
  Point incumbent_;
  std::deque<Point> pending_;
  std::map<Point, double> measured_;
  std::deque<size_t> order_;
  int knob_ = -1;
  int sweeps_ = 0;
  bool moved_in_sweep_ = false;
};

std::vector<std::string> names_with_auto() {
  std::vector<std::string> names = {"auto"};
  for (const auto& info : strategies()) names.push_back(info.name);
  return names;
}

}  // namespace

const std::vector<StrategyInfo>& strategies() {
  static const std::vector<StrategyInfo> list = {
      {"descent", "coordinate descent over the knobs, seeded knob order, noise margin",
       [](const SearchSpace& space) { return space.size() >= kDescentMinPoints; },
       [](const SearchSpace& space, const StrategyOptions& options) -> std::unique_ptr<Strategy> {
         return std::make_unique<DescentStrategy>(space, options);
       }},
      {"grid", "every config of the search space",
       [](const SearchSpace&) { return true; },
       [](const SearchSpace& space, const StrategyOptions&) -> std::unique_ptr<Strategy> {
         return std::make_unique<GridStrategy>(space);
       }},
  };
  return list;
}

std::string resolve_strategy_name(const std::string& name, const SearchSpace& space) {
  for (const auto& info : strategies()) {
    if (name == "auto" ? info.enabled(space) : name == info.name) return info.name;
  }
  ACS_THROW(InvalidArgument, "--strategy '{}' is not one of {}", name, fmt::join(names_with_auto(), ", "));
}

std::unique_ptr<Strategy> make_strategy(const std::string& name, const SearchSpace& space,
                                        const StrategyOptions& options) {
  const std::string resolved = resolve_strategy_name(name, space);
  for (const auto& info : strategies()) {
    if (info.name == resolved) return info.make(space, options);
  }
  ACS_THROW(InvalidArgument, "--strategy '{}' is not one of {}", name, fmt::join(names_with_auto(), ", "));
}

}  // namespace acspeed::tuner
