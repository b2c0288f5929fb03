// The decision rule on measured pairs: when a candidate replaces DDP's defaults, and the reasons it
// does not.
#include "decision_rule.h"
#include "acspeed/tuner/statistics.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

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
  // What would resolve it, from the rule's own statistics: the pairs at this spread.
  const auto n = pairs_to_resolve(v.pair_speedups);
  ASSERT_TRUE(n);
  EXPECT_NE(v.note.find(fmt::format("about {} pairs would resolve it if the speedup holds: run again with --repeats {}",
                                    *n, *n)),
            std::string::npos)
      << v.note;
  // Inside a job (online tuning) there is no rerun to give --repeats to: the note names acspeed-tune.
  RuleOptions online;
  online.online = true;
  const Verdict o = judge(candidate(), {pair(0.10, 0.13), pair(0.10, 0.08), pair(0.10, 0.11)}, "", online);
  EXPECT_NE(o.note.find(fmt::format("about {} pairs would resolve it if the speedup holds: `acspeed-tune --repeats {}` "
                                    "can measure them",
                                    *n, *n)),
            std::string::npos)
      << o.note;
  EXPECT_EQ(o.note.find("run again"), std::string::npos) << o.note;
}

TEST(DecisionRule, PairsToResolveIsTheFewestWhoseIntervalWouldExcludeOne) {
  const std::vector<double> speedups = {1.30, 0.95, 1.10};
  std::vector<double> logs;
  for (double s : speedups) logs.push_back(std::log(s));
  const double m = mean(logs), sd = stddev(logs);
  const auto n = pairs_to_resolve(speedups);
  ASSERT_TRUE(n);
  EXPECT_GT(*n, 3);
  const auto half_width = [&](int pairs) { return t_critical_95(pairs - 1) * sd / std::sqrt(double(pairs)); };
  EXPECT_LT(half_width(*n), m);
  EXPECT_GE(half_width(*n - 1), m) << "not the fewest";
  // A mean at or below 1 is not resolved by more pairs; nor is a need beyond --repeats' limit.
  EXPECT_FALSE(pairs_to_resolve({1.10, 0.90, 0.95}));
  EXPECT_FALSE(pairs_to_resolve({1.30, 0.95, 1.10}, *n - 1));
  const Verdict v = judge(candidate(), {pair(0.10, 0.11), pair(0.10, 0.09), pair(0.10, 0.095)}, "", {});
  EXPECT_NE(v.note.find("more pairs would not resolve it (its pairs' speedups "), std::string::npos) << v.note;
}

TEST(DecisionRule, IntervalWhollyBelowOneSaysSignificantlySlower) {
  // Each pair about 0.93x: the interval lies below 1, which "does not exclude 1" would misstate.
  const Verdict v = judge(candidate(), {pair(0.10, 0.0935), pair(0.10, 0.0925), pair(0.10, 0.094)}, "", {});
  EXPECT_FALSE(v.accepted);
  ASSERT_TRUE(v.ci_high.has_value());
  EXPECT_LT(*v.ci_high, 1.0);
  EXPECT_NE(v.note.find("significantly slower than DDP defaults"), std::string::npos) << v.note;
  EXPECT_NE(v.note.find("wholly below 1"), std::string::npos) << v.note;
  EXPECT_EQ(v.note.find("does not exclude 1"), std::string::npos) << v.note;
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

TEST(DecisionRule, ACompressedCandidateIsNotJudgedAgainInThePairs) {
  // Final losses far apart: for an exact algorithm a bug, for compression the guard's verdict on its
  // trajectory (measured once, before the pairs) stands.
  const PairRun far = pair(0.1, 0.2, 1.5, 1.0);
  EXPECT_EQ(pair_rejection(candidate(Compression::kPowerSgd), far, {}), "");
  EXPECT_NE(pair_rejection(candidate(), far, {}), "");
}

Inflation measured(double estimate, double low, double high) {
  Inflation i;
  i.kind = InflationKind::kMeasured;
  i.estimate = estimate;
  i.low = low;
  i.high = high;
  return i;
}

TEST(DecisionRule, ACompressedCandidateIsAcceptedOnItsEffectiveSpeedup) {
  // Step speedup about 3x [2.9, 3.1]; inflation 1.4x [1.2, 1.6]: effective lower end 2.9 / 1.6 > 1.3.
  const std::vector<PairRun> pairs = {pair(0.10, 0.30), pair(0.10, 0.31), pair(0.10, 0.29)};
  const Verdict v = judge(candidate(Compression::kPowerSgd), pairs, "", {}, {measured(1.4, 1.2, 1.6), 1.3});
  EXPECT_TRUE(v.accepted) << v.note;
  ASSERT_TRUE(v.speedups.effective && v.speedups.effective_low);
  EXPECT_NEAR(*v.speedups.effective, *v.speedup / 1.4, 1e-12);
  EXPECT_NEAR(*v.speedups.effective_low, *v.ci_low / 1.6, 1e-12);
  // The note shows the three side by side.
  EXPECT_NE(v.note.find("step 2.999x ["), std::string::npos) << v.note;
  EXPECT_NE(v.note.find("inflation 1.40x [1.20, 1.60]"), std::string::npos) << v.note;
  EXPECT_NE(v.note.find("effective 2.142x"), std::string::npos) << v.note;
  const nlohmann::json j = v.speedups;
  EXPECT_DOUBLE_EQ(j["inflation"]["high"].get<double>(), 1.6);
  EXPECT_NEAR(j["effective_speedup"]["low"].get<double>(), *v.ci_low / 1.6, 1e-12);
}

TEST(DecisionRule, ACompressedCandidateMustBeatTheBestExactConfig) {
  const std::vector<PairRun> pairs = {pair(0.10, 0.30), pair(0.10, 0.31), pair(0.10, 0.29)};
  // Effective lower end about 2.9 / 1.6 = 1.8: below an exact config's 2.0 step speedup.
  const Verdict beaten = judge(candidate(Compression::kPowerSgd), pairs, "", {}, {measured(1.4, 1.2, 1.6), 2.0});
  EXPECT_FALSE(beaten.accepted);
  EXPECT_NE(beaten.note.find("does not exceed 2.000, the best non-compressing config's step speedup"),
            std::string::npos)
      << beaten.note;
  // Inflation 3 [2.5, 3.5]: effective lower end 0.83, below 1 whatever the exact configs do.
  const Verdict slower = judge(candidate(Compression::kPowerSgd), pairs, "", {}, {measured(3, 2.5, 3.5), 1.0});
  EXPECT_FALSE(slower.accepted);
  EXPECT_NE(slower.note.find("does not exceed 1.000"), std::string::npos) << slower.note;
}

TEST(DecisionRule, AVerdictWhoseIntervalStraddlesItsBarIsUndecidedByPairsAndMorePairsDecideIt) {
  // The seed command's fp16 pairs (speedups 1.619, 1.377, 1.287), near-exact inflation, against the
  // best exact config's 1.261: the estimate 1.42 clears it, the lower end 1.06 does not.
  const Inflation near_exact = measured(1.0, 0.997, 1.003);
  std::vector<PairRun> pairs = {pair(0.4535, 0.7340), pair(0.4733, 0.6518), pair(0.4960, 0.6383)};
  const Verdict three = judge(candidate(Compression::kFp16), pairs, "", {}, {near_exact, 1.261});
  EXPECT_FALSE(three.accepted) << three.note;
  EXPECT_TRUE(undecided_by_pairs(three, ""));
  EXPECT_FALSE(undecided_by_pairs(three, "pair 3's candidate run failed"));  // a failure decides
  // The same three pairs twice more: the interval narrows, the lower end clears the bar.
  for (int k = 0; k < 6; ++k) pairs.push_back(pairs[k % 3]);
  const Verdict nine = judge(candidate(Compression::kFp16), pairs, "", {}, {near_exact, 1.261});
  EXPECT_TRUE(nine.accepted) << nine.note;
  EXPECT_FALSE(undecided_by_pairs(nine, ""));
  // An estimate that does not clear the bar at the inflation's upper end: no pairs would change that.
  const std::vector<PairRun> three_x = {pair(0.10, 0.30), pair(0.10, 0.31), pair(0.10, 0.29)};
  EXPECT_FALSE(undecided_by_pairs(judge(candidate(Compression::kPowerSgd), three_x, "", {}, {measured(1.4, 1.2, 1.6), 2.0}), ""));
  // An exact config: an estimate above 1 whose interval includes 1 is undecided; one below 1 is not.
  EXPECT_TRUE(undecided_by_pairs(judge(candidate(), {pair(0.10, 0.13), pair(0.10, 0.08), pair(0.10, 0.11)}, "", {}), ""));
  EXPECT_FALSE(undecided_by_pairs(judge(candidate(), {pair(0.10, 0.07), pair(0.10, 0.12), pair(0.10, 0.09)}, "", {}), ""));
  // An unbounded inflation: never ranked, never undecided by pairs.
  EXPECT_FALSE(undecided_by_pairs(judge(candidate(Compression::kPowerSgd), three_x, "", {},
                                        {measured(1.4, 1.2, std::numeric_limits<double>::infinity()), 1.0}), ""));
}

TEST(DecisionRule, ACandidateKeptOutByItsBarAloneIsSaidToBe) {
  // The time-to-accuracy command's fp16 pairs (p50 ms): 1.30x [1.22, 1.38], near-exact inflation.
  const Inflation near_exact = measured(1.0, 0.997, 1.003);
  const std::vector<PairRun> pairs = {pair(0.5507, 0.6954), pair(0.5218, 0.6921), pair(0.4583, 0.5984)};
  // Against the search's bar of 1.331: out by the bar alone (at a bar of 1 it would be accepted).
  const Verdict at_search_bar = judge(candidate(Compression::kFp16), pairs, "", {}, {near_exact, 1.331});
  EXPECT_FALSE(at_search_bar.accepted) << at_search_bar.note;
  EXPECT_TRUE(kept_out_by_bar(at_search_bar, ""));
  EXPECT_FALSE(kept_out_by_bar(at_search_bar, "pair 3's candidate run failed"));  // a failure decides
  // Against the exact config's own pairs' 1.164: accepted; nothing keeps it out.
  const Verdict at_pairs_bar = judge(candidate(Compression::kFp16), pairs, "", {}, {near_exact, 1.164});
  EXPECT_TRUE(at_pairs_bar.accepted) << at_pairs_bar.note;
  EXPECT_FALSE(kept_out_by_bar(at_pairs_bar, ""));
  // A bar of 1 is no bar: a rejection there is the pairs' own.
  const std::vector<PairRun> slower = {pair(0.70, 0.60), pair(0.72, 0.61), pair(0.69, 0.62)};
  EXPECT_FALSE(kept_out_by_bar(judge(candidate(Compression::kFp16), slower, "", {}, {near_exact, 1.0}), ""));
  // Slower at the inflation's upper end than DDP's defaults: no bar keeps it out, its inflation does.
  EXPECT_FALSE(kept_out_by_bar(judge(candidate(Compression::kPowerSgd), pairs, "", {}, {measured(1.2, 1.0, 1.5), 1.331}), ""));
  // An unbounded inflation: never ranked, never kept out by a bar.
  EXPECT_FALSE(kept_out_by_bar(judge(candidate(Compression::kPowerSgd), pairs, "", {},
                                     {measured(1.0, 0.8, std::numeric_limits<double>::infinity()), 1.331}), ""));
}

TEST(DecisionRule, InfiniteOrUnmeasurableInflationIsNotChosenAndSaysWhich) {
  const std::vector<PairRun> pairs = {pair(0.10, 0.30), pair(0.10, 0.31), pair(0.10, 0.29)};
  Inflation infinite;
  infinite.kind = InflationKind::kInfinite;
  infinite.reason = "the compressed run never reaches the loss 1.2 within 60 steps";
  const Verdict a = judge(candidate(Compression::kPowerSgd), pairs, "", {}, {infinite, 1.0});
  EXPECT_FALSE(a.accepted);
  EXPECT_NE(a.note.find("its step inflation is infinite (the compressed run never reaches"), std::string::npos)
      << a.note;
  Inflation flat;
  flat.reason = "the uncompressed loss falls 0.01 to the target";
  const Verdict b = judge(candidate(Compression::kPowerSgd), pairs, "", {}, {flat, 1.0});
  EXPECT_FALSE(b.accepted);
  EXPECT_NE(b.note.find("its step inflation is unmeasurable (the uncompressed loss falls"), std::string::npos)
      << b.note;
  const Verdict unbounded = judge(candidate(Compression::kPowerSgd), pairs, "", {},
                                  {measured(1.5, 1.2, std::numeric_limits<double>::infinity()), 1.0});
  EXPECT_FALSE(unbounded.accepted);
  EXPECT_NE(unbounded.note.find("has no upper bound"), std::string::npos) << unbounded.note;
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
