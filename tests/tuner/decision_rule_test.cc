// The decision rule on measured pairs: when a candidate replaces DDP's defaults, and the reasons it
// does not.
#include "decision_rule.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace acspeed::tuner {
namespace {

CommConfig candidate(Compression compression = Compression::kNone) {
  CommConfig c;
  c.streams = 2;
  c.compression = compression;
  return c;
}

PairRun pair(double candidate_s, double baseline_s, double candidate_loss = 1.0, double baseline_loss = 1.0) {
  PairRun p;
  p.candidate_steps_s = {candidate_s, candidate_s * 1.01, candidate_s * 0.99};
  p.baseline_steps_s = {baseline_s, baseline_s * 1.01, baseline_s * 0.99};
  p.candidate_loss = candidate_loss;
  p.baseline_loss = baseline_loss;
  p.baseline_loss_first = 2.0;
  return p;
}

TEST(DecisionRule, ConsistentWinIsAcceptedWithItsInterval) {
  const Verdict v = judge(candidate(), {pair(0.10, 0.15), pair(0.10, 0.16), pair(0.10, 0.14)}, "", {});
  EXPECT_TRUE(v.accepted);
  ASSERT_TRUE(v.speedup && v.ci_low && v.ci_high);
  EXPECT_NEAR(*v.speedup, 1.5, 0.01);
  EXPECT_GT(*v.ci_low, 1.0);
  EXPECT_EQ(v.pair_speedups.size(), 3u);
  EXPECT_NE(v.note.find("over DDP defaults, 95% interval"), std::string::npos) << v.note;
}

TEST(DecisionRule, IntervalIncludingOneKeepsDdpDefaults) {
  const Verdict v = judge(candidate(), {pair(0.10, 0.13), pair(0.10, 0.08), pair(0.10, 0.11)}, "", {});
  EXPECT_FALSE(v.accepted);
  ASSERT_TRUE(v.ci_low.has_value());
  EXPECT_LE(*v.ci_low, 1.0);
  EXPECT_NE(v.note.find("does not exclude 1"), std::string::npos) << v.note;
}

TEST(DecisionRule, FewerThanTwoPairsOrAFailedRunKeepDdpDefaults) {
  EXPECT_NE(judge(candidate(), {pair(0.1, 0.2)}, "", {}).note.find("fewer than two pairs"), std::string::npos);
  const Verdict failed = judge(candidate(), {pair(0.1, 0.2), pair(0.1, 0.2)}, "the candidate failed in pair 3: boom", {});
  EXPECT_FALSE(failed.accepted);
  EXPECT_TRUE(failed.speedup.has_value());  // the pairs that completed are still evidence
  EXPECT_NE(failed.note.find("rejected: the candidate failed in pair 3"), std::string::npos) << failed.note;
}

TEST(DecisionRule, LossBeyondTheToleranceRejectsAndSaysWhy) {
  RuleOptions options;
  options.loss_tolerance = 0.05;
  PairRun close = pair(0.1, 0.2, 1.02, 1.0);
  EXPECT_EQ(pair_rejection(candidate(), close, options), "");
  PairRun far = pair(0.1, 0.2, 1.5, 1.0);
  const std::string exact = pair_rejection(candidate(), far, options);
  EXPECT_NE(exact.find("beyond --loss-tolerance 0.05"), std::string::npos) << exact;
  EXPECT_NE(exact.find("an exact algorithm should match"), std::string::npos) << exact;
}

TEST(DecisionRule, ACompressedCandidateIsJudgedByTheConvergenceGuardInEachPair) {
  PairRun blind = pair(0.1, 0.2, 1.0, 1.0);  // close final losses, but nothing measured for the guard
  const std::string unseen = pair_rejection(candidate(Compression::kFp16), blind, {});
  EXPECT_NE(unseen.find("convergence guard failed it: no gradient-fidelity figures"), std::string::npos) << unseen;
  EXPECT_EQ(blind.guard["passed"], false);

  PairRun good = pair(0.1, 0.2);
  good.baseline_metrics.losses = {7.08, 1.0, 0.0406};
  good.candidate_metrics.losses = {7.08, 1.1, 0.0450};
  good.candidate_metrics.fidelity_cosine = 0.99;
  good.candidate_metrics.fidelity_norm_error = 0.01;
  EXPECT_EQ(pair_rejection(candidate(Compression::kPowerSgd), good, {}), "");
  const nlohmann::json j = good;
  EXPECT_EQ(j["guard"]["passed"], true);
  EXPECT_DOUBLE_EQ(j["guard"]["fidelity"]["cosine"].get<double>(), 0.99);
}

TEST(DecisionRule, DdpDefaultsAsTheFastestNeedNoPairs) {
  const Verdict v = judge(CommConfig{}, {}, "", {});
  EXPECT_TRUE(v.accepted);
  EXPECT_FALSE(v.speedup.has_value());
  EXPECT_NE(v.note.find("keep DDP defaults"), std::string::npos);
}

TEST(DecisionRule, PairEvidenceCarriesOrderStepsAndSpeedup) {
  PairRun p = pair(0.1, 0.2);
  p.candidate_first = false;
  const nlohmann::json j = p;
  EXPECT_EQ(j["order"], "baseline-first");
  EXPECT_DOUBLE_EQ(j["speedup"].get<double>(), 2.0);
  EXPECT_EQ(j["candidate_step_times_s"].size(), 3u);
  EXPECT_DOUBLE_EQ(j["candidate_loss"].get<double>(), 1.0);
}

}  // namespace
}  // namespace acspeed::tuner
