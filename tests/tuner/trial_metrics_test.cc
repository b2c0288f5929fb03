#include "acspeed/tuner/trial_metrics.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "acspeed/error.h"

namespace acspeed::tuner {
namespace {

TEST(TrialMetrics, StepStatisticsAndThroughput) {
  const auto m = metrics_from_steps({0.4, 0.1, 0.2, 0.3}, 32, 2);
  EXPECT_DOUBLE_EQ(m.p50_s, 0.25);
  EXPECT_DOUBLE_EQ(m.min_s, 0.1);
  EXPECT_DOUBLE_EQ(m.max_s, 0.4);
  EXPECT_DOUBLE_EQ(m.samples_per_s, 32 / 0.25);
  EXPECT_EQ(m.steps, 4);
  EXPECT_EQ(m.warmup_steps, 2);
}

TEST(TrialMetrics, JsonRoundTripKeepsDocumentedKeys) {
  auto m = metrics_from_steps({0.5, 0.5}, 8, 1);
  m.comm_s = 0.2;
  m.exposed_comm_s = 0.1;
  m.probe = "cpu";
  m.loss = 2.5;
  m.finite = false;
  m.pair = 3;
  const std::string text = metrics_to_json(m);
  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j.at("version"), kTrialMetricsVersion);
  EXPECT_DOUBLE_EQ(j.at("p50_s").get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j.at("samples_per_s").get<double>(), 16.0);
  EXPECT_DOUBLE_EQ(j.at("exposed_comm_s").get<double>(), 0.1);
  EXPECT_FALSE(j.contains("compute_s"));  // absent where no probe measured it
  const auto back = metrics_from_json(text);
  EXPECT_DOUBLE_EQ(back.p50_s, 0.5);
  EXPECT_EQ(back.comm_s, 0.2);
  EXPECT_FALSE(back.compute_s.has_value());
  EXPECT_EQ(back.probe, "cpu");
  EXPECT_EQ(back.finite, false);
  EXPECT_EQ(back.pair, 3);
  EXPECT_THROW(metrics_from_json("[1,2]"), InvalidArgument);
}

TEST(TrialMetrics, WrongTypesAreErrorsNotSilentlyDropped) {
  try {
    metrics_from_json(R"({"p50_s": 0.5, "loss": "1.5"})");
    ADD_FAILURE() << "a string loss was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'loss' must be a number, got \"1.5\""), std::string::npos) << e.what();
  }
  EXPECT_THROW(metrics_from_json(R"({"pair": 1.5})"), InvalidArgument);
  EXPECT_THROW(metrics_from_json(R"({"finite": "yes"})"), InvalidArgument);
}

TEST(TrialMetrics, AMissingFiniteIsUnknownNotFinite) {
  EXPECT_EQ(metrics_from_json(R"({"p50_s": 0.5, "loss": 1.5})").finite, std::nullopt);
  EXPECT_EQ(metrics_from_json(R"({"finite": true})").finite, true);
  EXPECT_FALSE(nlohmann::json::parse(metrics_to_json(TrialMetrics{})).contains("finite"));
}

}  // namespace
}  // namespace acspeed::tuner
