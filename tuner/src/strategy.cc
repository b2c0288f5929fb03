#include "acspeed/tuner/strategy.h"

#include <algorithm>
#include <cmath>
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
    if (options_.order_by) order_pending();
    return true;
  }

  // The knob's values by forecast step; the unforecast ones first, in index order.
  void order_pending() {
    std::vector<std::pair<double, Point>> keyed;
    for (auto& p : pending_) {
      const auto f = options_.order_by(p);
      keyed.emplace_back(f ? f->step_s : -1.0, std::move(p));
    }
    std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    pending_.clear();
    for (auto& [key, p] : keyed) pending_.push_back(std::move(p));
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

class ModelStrategy : public Strategy {
 public:
  ModelStrategy(const SearchSpace& space, const StrategyOptions& options)
      : options_(options), descent_(space, options), default_point_(space.default_point()) {
    for (size_t i = 0; i < space.size(); ++i) order_.push_back(space.point_at(i));
    std::mt19937_64 generator(options.seed);
    std::shuffle(order_.begin(), order_.end(), generator);
  }
  std::string name() const override { return "model"; }

  std::optional<Point> next() override {
    if (!guided_) {
      guided_ = options_.forecast && options_.forecast(default_point_).has_value();
      if (!guided_) {
        auto p = descent_.next();
        if (p) from_descent_ = true;
        return p;
      }
    }
    from_descent_ = false;
    if (!measured_.count(default_point_)) return default_point_;
    double best = kFailedCost;
    for (const auto& [point, cost] : measured_) best = std::min(best, cost);
    std::vector<std::pair<Point, Forecast>> forecast;
    double lowest_bound = kFailedCost;
    for (const auto& p : order_) {
      const auto f = options_.forecast(p);
      if (f) lowest_bound = std::min(lowest_bound, f->bound_s);
      const auto measured = measured_.find(p);
      if (measured != measured_.end()) {
        if (f) note_if_bound_beaten(measured->second, *f);
        continue;
      }
      if (!f) return p;  // the model cannot say: measure it
      forecast.emplace_back(p, *f);
    }
    const auto model_view = options_.forecast(default_point_);  // reliability is the link fit's, not a point's
    const bool reliable = model_view && model_view->reliable;
    if (!reliable) unreliable_seen_ = true;
    if (reliable && beaten_bound_.empty() && best < kFailedCost && lowest_bound < kFailedCost &&
        best <= (1 + options_.stop_margin) * lowest_bound) {
      stopped_ = fmt::format("stopped: the best measured step ({:.1f} ms) is within {:.0f}% of the lowest bound "
                             "({:.1f} ms)", best * 1e3, options_.stop_margin * 100, lowest_bound * 1e3);
      skipped_ = forecast.size();
      return std::nullopt;
    }
    const std::pair<Point, Forecast>* pick = nullptr;
    size_t pruned = 0;
    const double margin = prune_margin();
    for (const auto& candidate : forecast) {
      if (reliable && best < kFailedCost && candidate.second.step_s > (1 + margin) * best) {
        ++pruned;
        continue;
      }
      if (pick == nullptr || candidate.second.step_s < pick->second.step_s) pick = &candidate;
    }
    if (pick == nullptr) {
      skipped_ = pruned;
      if (pruned > 0) {
        stopped_ = fmt::format("{} config(s) not measured: each predicted more than {:.0f}% slower than the best "
                               "measured step ({:.1f} ms)", pruned, margin * 100, best * 1e3);
      }
      return std::nullopt;
    }
    forecast_of_next_ = pick->second.step_s;
    return pick->first;
  }

  void report(const Point& point, double cost) override {
    if (from_descent_) descent_.report(point, cost);
    measured_[point] = cost;
    if (forecast_of_next_ && cost < kFailedCost && cost > 0) {
      errors_.push_back(std::abs(*forecast_of_next_ - cost) / cost);
    }
    forecast_of_next_.reset();
  }

  std::string summary() const override {
    if (!guided_) return "the step model never forecast: coordinate descent ran instead";
    if (stopped_.empty() && unreliable_seen_) {
      return "the link fit did not explain the communication times within 10% (or more flows showed less "
             "bandwidth than fewer): the model only ordered the configs, pruning none";
    }
    if (beaten_bound_.empty()) return stopped_;
    return stopped_.empty() ? beaten_bound_ : stopped_ + "; " + beaten_bound_;
  }

 private:
  // A measured step more than stop_margin below its own forecast bound shows the bounds overestimate
  // this session's steps: the search is then never stopped at "the lowest bound" (it could stop
  // before a config that is faster still). Said once, with the first such measurement.
  void note_if_bound_beaten(double cost, const Forecast& f) {
    if (!beaten_bound_.empty() || cost >= kFailedCost || cost >= (1 - options_.stop_margin) * f.bound_s) return;
    beaten_bound_ = fmt::format("a measured step ({:.1f} ms) was more than {:.0f}% below its bound ({:.1f} ms): the "
                                "bounds overestimate this session's steps, so the search did not stop at the lowest "
                                "bound", cost * 1e3, options_.stop_margin * 100, f.bound_s * 1e3);
  }

  StrategyOptions options_;
  DescentStrategy descent_;
  Point default_point_;
  std::vector<Point> order_;  // every point, in a seeded order (the ties' order)
  std::map<Point, double> measured_;
  bool guided_ = false;
  bool from_descent_ = false;
  size_t skipped_ = 0;
  std::string stopped_;
  bool unreliable_seen_ = false;
  std::string beaten_bound_;
  std::optional<double> forecast_of_next_;  // what the model predicted for the point being measured
  std::vector<double> errors_;              // |forecast - measured| / measured of the points measured

  // "Clearly slower": prune_margin, or the largest error of the model's own forecasts so far when
  // that is larger (a noisy machine or a model that misses must not prune the best config).
  double prune_margin() const {
    double margin = options_.prune_margin;
    for (double e : errors_) margin = std::max(margin, e);
    return margin;
  }
};

std::vector<std::string> names_with_auto() {
  std::vector<std::string> names = {"auto"};
  for (const auto& info : strategies()) names.push_back(info.name);
  return names;
}

}  // namespace

ForecastFn model_forecast(const StepModel& model, const SearchSpace& space, const Scenario& scenario) {
  return [&model, space, scenario](const Point& point) -> std::optional<Forecast> {
    const Prediction p = predict(model, space.config_at(point), scenario);
    if (!p.ok) return std::nullopt;
    return Forecast{p.step_s, p.bound_s, p.reliable};
  };
}

const std::vector<StrategyInfo>& strategies() {
  static const std::vector<StrategyInfo> list = {
      {"model", "guided by the step model: lowest predicted step first, prune at +10% (or its worst miss), stop within 5% "
       "of the bound, only while the link fit explains the times within 10%",
       [](const SearchSpace& space, int nnodes) { return space.size() >= kDescentMinPoints && nnodes >= 2; },
       [](const SearchSpace& space, const StrategyOptions& options) -> std::unique_ptr<Strategy> {
         return std::make_unique<ModelStrategy>(space, options);
       }},
      {"descent", "coordinate descent over the knobs, seeded knob order, noise margin",
       [](const SearchSpace& space, int) { return space.size() >= kDescentMinPoints; },
       [](const SearchSpace& space, const StrategyOptions& options) -> std::unique_ptr<Strategy> {
         return std::make_unique<DescentStrategy>(space, options);
       }},
      {"grid", "every config of the search space",
       [](const SearchSpace&, int) { return true; },
       [](const SearchSpace& space, const StrategyOptions&) -> std::unique_ptr<Strategy> {
         return std::make_unique<GridStrategy>(space);
       }},
  };
  return list;
}

std::string resolve_strategy_name(const std::string& name, const SearchSpace& space, int nnodes) {
  for (const auto& info : strategies()) {
    if (name == "auto" ? info.enabled(space, nnodes) : name == info.name) return info.name;
  }
  ACS_THROW(InvalidArgument, "--strategy '{}' is not one of {}", name, fmt::join(names_with_auto(), ", "));
}

std::unique_ptr<Strategy> make_strategy(const std::string& name, const SearchSpace& space,
                                        const StrategyOptions& options) {
  for (const auto& info : strategies()) {
    if (info.name == name) return info.make(space, options);
  }
  ACS_THROW(InvalidArgument, "--strategy '{}' is not one of {}", name, fmt::join(names_with_auto(), ", "));
}

}  // namespace acspeed::tuner
