// Issue 36's rule on a link capped per flow (the testbed's 2x1@2gbit/500mbit: each node 2 Gbit/s,
// each TCP flow 500 Mbit/s): the model strategy, guided by a step model that has calibrated one flow
// only, measures a 2-stream config before it stops, instead of stopping at the one-flow bound.
// Each trial is synthesised from the link: a config of N flows gets min(N x 62.5, 250) MB/s.
#include <algorithm>

#include <gtest/gtest.h>

#include "acspeed/tuner/search_space.h"
#include "acspeed/tuner/step_model.h"
#include "acspeed/tuner/strategy.h"

namespace acspeed::tuner {
namespace {

constexpr double kFlowRate = 62.5e6;   // bytes/s per TCP flow (500 Mbit/s)
constexpr double kLinkRate = 250e6;    // bytes/s per node (2 Gbit/s)
constexpr int64_t kPayload = 46'800'000;  // resnet18's gradients; 2 ranks: the ring sends 1 x per node
constexpr double kLatency = 0.002;
constexpr double kHead = 0.050;        // what communication does not overlap

SearchSpace space() {
  SearchSpace s;
  s.bucket_mb = {5, 25};
  s.streams = {1, 2};
  return s;  // 4 configs, allreduce, no compression
}

TrialMetrics trial_of(const CommConfig& c, bool hooked) {
  const int buckets = c.bucket_cap_mb.value_or(25) < 25 ? 10 : 3;
  const double rate = std::min(c.streams * kFlowRate, kLinkRate);
  const double comm = static_cast<double>(buckets) / c.streams * kLatency + kPayload / rate;
  TrialMetrics m;
  m.p50_s = kHead + comm;
  if (hooked) {  // DDP's defaults run DDP's own allreduce: no per-bucket times
    m.bucket_count = buckets;
    m.bucket_bytes = kPayload;
    m.comm_s = comm;
  }
  return m;
}

// The session before its search: the compute-only step and DDP's defaults through acspeed's hook.
std::vector<ModelTrial> calibration() {
  TrialMetrics compute;
  compute.p50_s = 0.110;
  compute.forward_s = 0.030;
  compute.optimizer_s = 0.010;
  return {{TrialRole::kCompute, CommConfig{}, compute}, {TrialRole::kCalibration, CommConfig{}, trial_of(CommConfig{}, true)}};
}

struct Search {
  std::vector<CommConfig> measured;
  std::string summary;
};

// Runs the model strategy over space() as a session does: each measured config becomes a trial, and
// the step model is recalibrated after each. `forecast_of` builds the strategy's forecast from it.
Search search(const std::function<ForecastFn(const StepModel&, const SearchSpace&)>& forecast_of) {
  const SearchSpace s = space();
  std::vector<ModelTrial> trials = calibration();
  StepModel model = calibrate(trials, {2, 2});
  StrategyOptions options;
  options.seed = 1;
  options.forecast = forecast_of(model, s);
  auto strategy = make_strategy("model", s, options);
  Search out;
  while (auto point = strategy->next()) {
    const CommConfig c = s.config_at(*point);
    const TrialMetrics m = trial_of(c, !c.is_default());
    out.measured.push_back(c);
    trials.push_back({TrialRole::kSearch, c, m});
    model = calibrate(trials, {2, 2});
    strategy->report(*point, m.p50_s);
    if (out.measured.size() > s.size()) break;
  }
  out.summary = strategy->summary();
  return out;
}

bool any_two_streams(const std::vector<CommConfig>& configs) {
  return std::any_of(configs.begin(), configs.end(), [](const CommConfig& c) { return c.streams == 2; });
}

TEST(UnmeasuredFlows, ATwoStreamConfigIsMeasuredBeforeTheModelStrategyStops) {
  const Search run = search([](const StepModel& model, const SearchSpace& s) { return model_forecast(model, s); });
  ASSERT_FALSE(run.measured.empty());
  EXPECT_TRUE(run.measured.front().is_default());
  EXPECT_TRUE(any_two_streams(run.measured)) << run.summary;
  // The 2-stream config is also what it found: about 1.8x faster than one flow.
  const auto best = std::min_element(run.measured.begin(), run.measured.end(), [](const auto& a, const auto& b) {
    return trial_of(a, true).p50_s < trial_of(b, true).p50_s;
  });
  EXPECT_EQ(best->streams, 2);
}

TEST(UnmeasuredFlows, ANcclSocketsValueWithoutItsFlowCountFittedIsMeasuredNotForecast) {
  // NCCL on CUDA (the hook's groups per role): 2x4 sockets make the one group eight flows.
  const ModelSetup nccl{2, 2, true};
  std::vector<ModelTrial> trials = calibration();
  const StepModel model = calibrate(trials, nccl);
  CommConfig sockets;
  sockets.nccl_sockets = NcclSockets{2, 4};
  EXPECT_TRUE(flow_count_unmeasured(model, sockets));
  EXPECT_FALSE(predict(model, sockets).ok);
  EXPECT_FALSE(flow_count_unmeasured(model, CommConfig{}));
  // Once a trial of eight flows calibrated the link, the value is forecast from it.
  CommConfig eight_streams;
  eight_streams.streams = 8;
  trials.push_back({TrialRole::kSearch, eight_streams, trial_of(eight_streams, true)});
  const StepModel fitted = calibrate(trials, nccl);
  EXPECT_FALSE(flow_count_unmeasured(fitted, sockets));
  // On gloo NCCL's variables change nothing: one flow, forecast from the one-flow fit.
  EXPECT_FALSE(flow_count_unmeasured(calibrate(calibration(), {2, 2, false}), sockets));
}

TEST(UnmeasuredFlows, AForecastOfEveryConfigFromOneFlowsBoundStopsBeforeAnyTwoStreamConfig) {
  // The premise of the test above: forecasting every config with the one-flow fit (what the model did
  // when it pooled every hooked trial into one link) puts the best measured step within 5% of the
  // lowest bound right after DDP's defaults, and the search ends there.
  const Search run = search([](const StepModel& model, const SearchSpace& s) -> ForecastFn {
    return [&model, s](const Point& p) -> std::optional<Forecast> {
      CommConfig one_flow = s.config_at(p);
      one_flow.streams = 1;
      const Prediction prediction = predict(model, one_flow);
      if (!prediction.ok) return std::nullopt;
      return Forecast{prediction.step_s, prediction.bound_s, prediction.reliable};
    };
  });
  EXPECT_FALSE(any_two_streams(run.measured));
  EXPECT_NE(run.summary.find("within 5% of the lowest bound"), std::string::npos) << run.summary;
}

}  // namespace
}  // namespace acspeed::tuner
