// The model strategy replayed on stored grid sessions from real runs (tests/tuner/fixtures/*.json:
// `acspeed-tune report --format json` of `--strategy grid` sessions on acspeed-testbed): the step
// model calibrated on what the replay has measured so far guides it, each point costs what the grid
// measured, and the grid's best config is never pruned.
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "acspeed/tuner/search_space.h"
#include "acspeed/tuner/step_model.h"
#include "acspeed/tuner/strategy.h"

namespace acspeed::tuner {
namespace {

using nlohmann::json;

struct Fixture {
  std::string name;
  SearchSpace space;
  ModelSetup setup;
  std::vector<ModelTrial> calibration;    // compute and calibration trials
  std::map<size_t, ModelTrial> grid;      // search trials by ordinal in the space
};

Fixture load(const std::filesystem::path& path) {
  std::ifstream in(path);
  const json report = json::parse(in);
  Fixture f;
  f.name = path.filename().string();
  const json& session = report.at("session");
  const json& space = session.at("search_space");
  f.space.bucket_mb = space.at("bucket_mb").get<std::vector<double>>();
  f.space.streams = space.at("streams").get<std::vector<int>>();
  f.space.algorithms.clear();
  for (const auto& a : space.at("algorithm")) f.space.algorithms.push_back(parse_algorithm(a.get<std::string>()));
  f.space.compression.clear();
  for (const auto& c : space.at("compression")) f.space.compression.push_back(parse_compression(c.get<std::string>()));
  f.setup = {session.at("world_size").get<int>(), session.at("nnodes").get<int>()};
  for (const auto& t : report.at("trials")) {
    if (parse_trial_status(t.at("status").get<std::string>()) != TrialStatus::kOk) continue;
    ModelTrial trial{parse_trial_role(t.at("role").get<std::string>()), t.at("config").get<CommConfig>(),
                     t.at("metrics").get<TrialMetrics>()};
    if (trial.role == TrialRole::kCompute || trial.role == TrialRole::kCalibration) {
      f.calibration.push_back(trial);
    } else if (trial.role == TrialRole::kSearch && trial.metrics.candidate_index) {
      f.grid[static_cast<size_t>(*trial.metrics.candidate_index)] = trial;
    }
  }
  return f;
}

std::vector<Fixture> fixtures() {
  std::vector<Fixture> out;
  for (const auto& entry : std::filesystem::directory_iterator(ACSPEED_TUNER_FIXTURES)) {
    if (entry.path().extension() == ".json") out.push_back(load(entry.path()));
  }
  return out;
}

TEST(ModelStrategyOnStoredSessions, PruningNeverDropsTheGridsBestConfig) {
  const auto all = fixtures();
  ASSERT_FALSE(all.empty()) << "no fixture in " << ACSPEED_TUNER_FIXTURES;
  for (const auto& f : all) {
    ASSERT_EQ(f.grid.size(), f.space.size()) << f.name << ": a fixture is a complete grid";
    size_t grid_best = 0;
    for (const auto& [index, trial] : f.grid) {
      if (trial.metrics.p50_s < f.grid.at(grid_best).metrics.p50_s) grid_best = index;
    }
    for (uint64_t seed : {1, 2, 3, 7, 42}) {
      std::vector<ModelTrial> seen = f.calibration;
      StepModel model = calibrate(seen, f.setup);
      StrategyOptions options;
      options.seed = seed;
      options.forecast = model_forecast(model, f.space);
      auto strategy = make_strategy("model", f.space, options);
      size_t trials = 0;
      bool measured_best = false;
      while (auto p = strategy->next()) {
        const size_t index = f.space.ordinal_of(*p);
        const ModelTrial& trial = f.grid.at(index);
        measured_best |= index == grid_best;
        seen.push_back(trial);
        model = calibrate(seen, f.setup);
        strategy->report(*p, trial.metrics.p50_s);
        ASSERT_LE(++trials, f.space.size());
      }
      EXPECT_TRUE(measured_best) << f.name << " seed " << seed << ": the grid's best ("
                                 << f.grid.at(grid_best).config.describe() << ") was not measured; "
                                 << strategy->summary();
      RecordProperty(f.name + " seed " + std::to_string(seed) + " trials", static_cast<int>(trials));
    }
  }
}

}  // namespace
}  // namespace acspeed::tuner
