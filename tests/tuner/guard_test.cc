// The convergence guard as a session component (tuner/src/guard.h) on fake trials: no workers, no
// store. Trajectories are the fake worker's: the loss falls linearly from 2.3 to 0.3 over the first
// third of the steps, then stays, with a small deterministic ripple; a stretch F needs F times the steps.
#include "guard.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "acspeed/comm_methods.h"
#include "acspeed/error.h"
#include "acspeed/tuner/convergence_guard.h"
#include "acspeed/tuner/inflation.h"

namespace acspeed::tuner {
namespace {

constexpr int kSteps = 60;

std::vector<double> curve(double stretch, int steps = kSteps) {
  std::vector<double> losses;
  for (int t = 0; t < steps; ++t) {
    losses.push_back(0.3 + 2 * std::max(0.0, 1 - t / (steps / 3.0) / stretch) + 0.002 * ((t * 7919) % 13 - 6) / 6);
  }
  return losses;
}

// A noisy run for the loss check's noise: the loss falls from 2.3 towards 0.3 (e-folding 20 steps),
// plus gap x exp(-t / tau) (a compressed run that lags, and catches up unless tau is infinite), plus
// noise uniform in +-0.175 drawn from splitmix64(seed): the reference has seed 1, compressed runs 2.
std::vector<double> noisy(int steps, uint64_t seed, double gap = 0, double tau = INFINITY) {
  std::vector<double> losses;
  uint64_t x = seed;
  for (int t = 0; t < steps; ++t) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    const double uniform = static_cast<double>(z >> 11) * 0x1.0p-53;
    losses.push_back(0.3 + 2 * std::exp(-t / 20.0) + gap * std::exp(-t / tau) + (uniform - 0.5) * 0.35);
  }
  return losses;
}

CommConfig compressed(Compression c, double bucket_mb = 25, int rank = 4) {
  CommConfig config;
  config.compression = c;
  config.bucket_cap_mb = bucket_mb;
  if (c == Compression::kPowerSgd) config.powersgd_rank = rank;
  return config;
}

// A trial as the session has it after the workers answered (what the plan asked for included).
Measured ran(int64_t ordinal, const CommConfig& config, const GuardPlan& plan, double p50, double stretch = 1,
             bool faithful = true) {
  Measured m;
  m.ordinal = ordinal;
  m.config = config;
  m.status = TrialStatus::kOk;
  m.step_s = m.ranking_cost = p50;
  m.metrics.p50_s = p50;
  m.metrics.finite = true;
  if (plan.fidelity_steps > 0) {
    m.metrics.fidelity_cosine = faithful ? 0.999 : 0.3;
    m.metrics.fidelity_norm_error = faithful ? 0.01 : 0.6;
    m.metrics.fidelity_steps = plan.fidelity_steps;
    m.metrics.fidelity_s = 2.0;
  }
  if (plan.trajectory_steps > 0) {
    m.metrics.trajectory = curve(stretch, plan.trajectory_steps);
    m.metrics.trajectory_s = 10.0;
  }
  return m;
}

class GuardTest : public ::testing::Test {
 protected:
  GuardTest() : guard_(options(), [this](const std::string& line) { notes_.push_back(line); }) {}
  static GuardOptions options() {
    GuardOptions o;
    o.active = true;
    o.trajectory_steps = kSteps;
    o.trajectory_cap = kTrajectoryCapFactor * kSteps;
    o.seed = 11;
    o.data = "synthetic";
    o.ranks_per_node = 2;  // hierarchical is a numerics of its own (numerics_key)
    return o;
  }
  // The reference run the guard asks for in a space of {none, fp16, powersgd} x bucket {5, 25}.
  void give_reference() {
    space_.bucket_mb = {5, 25};
    space_.compression = {Compression::kNone, Compression::kFp16, Compression::kPowerSgd};
    space_.powersgd_ranks = {4};
    const auto run = guard_.reference_to_run({}, space_);
    ASSERT_TRUE(run);
    const GuardPlan plan = guard_.before(run->config, TrialMode::kDdp, run->search);
    EXPECT_EQ(plan.trajectory_steps, kSteps);
    EXPECT_EQ(plan.fidelity_steps, 0);
    Measured m = ran(0, run->config, plan, 0.4);
    if (curves_) m.metrics.trajectory = curves_(run->config, plan.trajectory_steps);
    guard_.after(plan, true, m);
    guard_.reference_measured(m);
  }
  // A search trial through the guard: before, (the workers), after.
  Measured search(int64_t ordinal, const CommConfig& config, double p50, double stretch = 1, bool faithful = true) {
    const GuardPlan plan = guard_.before(config, TrialMode::kDdp, true);
    Measured m;
    if (plan.skip) {
      m.ordinal = ordinal;
      m.config = config;
    } else {
      m = ran(ordinal, config, plan, p50, stretch, faithful);
      if (curves_ && plan.trajectory_steps > 0) m.metrics.trajectory = curves_(config, plan.trajectory_steps);
    }
    guard_.after(plan, !plan.skip, m);
    return m;
  }
  // The runs the guard asks for to extend trajectories, as Session::extend_guard makes them (no
  // budget here): each one's label; `results` are judged again as the session's are.
  std::vector<std::string> extend(std::vector<Measured>& results, int64_t ordinal) {
    std::vector<std::string> labels;
    while (const auto run = guard_.extension(results)) {
      const GuardPlan plan = guard_.before(run->config, TrialMode::kDdp, run->search);
      EXPECT_TRUE(plan.extension);
      EXPECT_EQ(plan.fidelity_steps, 0);
      Measured m = ran(ordinal++, run->config, plan, changes_numerics(run->config) ? 0.1 : 0.4);
      if (curves_) m.metrics.trajectory = curves_(run->config, plan.trajectory_steps);
      guard_.after(plan, true, m);
      labels.push_back(run->label);
    }
    return labels;
  }
  // The reference (seed 1) and PowerSGD runs (seed 2) with the lag gap x exp(-t / tau).
  void lagging_powersgd(double gap, double tau) {
    curves_ = [gap, tau](const CommConfig& config, int steps) {
      return changes_numerics(config) ? noisy(steps, 2, gap, tau) : noisy(steps, 1);
    };
  }

  std::function<std::vector<double>(const CommConfig&, int)> curves_;  // trajectories other than curve()'s
  std::vector<std::string> notes_;
  SearchSpace space_;
  ConvergenceGuard guard_;
};

TEST_F(GuardTest, TheReferenceIsTheSearchStartWhenUncompressedElseDdpDefaults) {
  SearchSpace space;
  space.bucket_mb = {5, 25};
  space.compression = {Compression::kNone, Compression::kFp16};
  auto run = guard_.reference_to_run({}, space);
  ASSERT_TRUE(run);
  EXPECT_TRUE(run->search);
  EXPECT_EQ(run->config, space.config_at(space.default_point()));
  ASSERT_TRUE(run->candidate_index);
  EXPECT_EQ(*run->candidate_index, space.ordinal_of(space.default_point()));

  space.compression = {Compression::kFp16};  // the search starts compressed: DDP's defaults, apart
  run = guard_.reference_to_run({}, space);
  ASSERT_TRUE(run);
  EXPECT_FALSE(run->search);
  EXPECT_TRUE(run->config == CommConfig{});
  EXPECT_EQ(run->label, "DDP defaults (the convergence guard's uncompressed reference)");

  Measured failed;
  failed.status = TrialStatus::kFailed;
  failed.error = "boom";
  EXPECT_THROW(guard_.reference_measured(failed), Error);
}

TEST_F(GuardTest, NoReferenceRunWhenNothingCompressedIsSearchedOrAResumedOneHasTheTrajectory) {
  GuardOptions off = options();
  off.active = false;
  ConvergenceGuard idle(off, [](const std::string&) {});
  EXPECT_FALSE(idle.reference_to_run({}, space_));

  Measured stored;  // an uncompressed search result a resumed session stored with its trajectory
  stored.status = TrialStatus::kOk;
  stored.step_s = stored.ranking_cost = 0.4;
  stored.metrics.trajectory = curve(1);
  EXPECT_FALSE(guard_.reference_to_run({stored}, space_));
  // ... and it judges with it: a resumed fp16 trial is ranked again on its inflation
  GuardPlan measured_both;
  measured_both.fidelity_steps = kFidelitySteps;
  measured_both.trajectory_steps = kSteps;
  std::vector<Measured> resumed{stored, ran(1, compressed(Compression::kFp16), measured_both, 0.2, 1.5)};
  guard_.resume(resumed, {});
  ASSERT_TRUE(resumed[1].metrics.inflation);
  EXPECT_NEAR(resumed[1].metrics.inflation->estimate, 1.5, 0.1);
  EXPECT_DOUBLE_EQ(resumed[1].ranking_cost, 0.2 * resumed[1].metrics.inflation->high);
  // and its window is reused
  const GuardPlan plan = guard_.before(compressed(Compression::kFp16, 5), TrialMode::kDdp, true);
  EXPECT_EQ(plan.fidelity_steps, 0);
  EXPECT_EQ(plan.window, "fp16");
}

TEST_F(GuardTest, TheWindowAndTrajectoryAreMeasuredOncePerNumericsAndCarriedByTheOthers) {
  give_reference();
  EXPECT_EQ(guard_.before(CommConfig{}, TrialMode::kDdp, true).fidelity_steps, 0);  // uncompressed: nothing
  EXPECT_EQ(guard_.before(compressed(Compression::kFp16), TrialMode::kComputeOnly, false).fidelity_steps, 0);
  const Measured first = search(1, compressed(Compression::kFp16, 25), 0.2);
  EXPECT_EQ(first.metrics.fidelity_steps, kFidelitySteps);
  EXPECT_FALSE(first.metrics.fidelity_trial);
  // the same numerics with other buckets: carried, naming trial 1
  const GuardPlan again = guard_.before(compressed(Compression::kFp16, 5), TrialMode::kDdp, true);
  EXPECT_EQ(again.fidelity_steps, 0);
  EXPECT_EQ(again.trajectory_steps, 0);
  const Measured second = search(2, compressed(Compression::kFp16, 5), 0.25);
  EXPECT_EQ(second.metrics.fidelity_trial, 1);
  EXPECT_EQ(second.metrics.trajectory_trial, 1);
  EXPECT_EQ(second.metrics.trajectory, first.metrics.trajectory);
  EXPECT_EQ(second.status, TrialStatus::kOk);
  // another PowerSGD rank is another numerics; so is hierarchical
  EXPECT_EQ(guard_.before(compressed(Compression::kPowerSgd, 25, 4), TrialMode::kDdp, true).fidelity_steps,
            kFidelitySteps);
  CommConfig by_node = compressed(Compression::kFp16);
  by_node.algorithm = Algorithm::kHierarchical;
  EXPECT_EQ(guard_.before(by_node, TrialMode::kDdp, true).fidelity_steps, kFidelitySteps);
  EXPECT_NE(numerics_key(by_node, 2), numerics_key(compressed(Compression::kFp16), 2));
  EXPECT_EQ(numerics_key(compressed(Compression::kPowerSgd, 5, 4), 2), "powersgd rank 4 start 10");
}

TEST_F(GuardTest, WithOneRankPerNodeHierarchicalCarriesTheFlatConfigsWindowAndVerdict) {
  GuardOptions one_rank = options();
  one_rank.ranks_per_node = 1;
  guard_ = ConvergenceGuard(one_rank, [this](const std::string& line) { notes_.push_back(line); });
  give_reference();
  const Measured flat = search(1, compressed(Compression::kPowerSgd, 25, 4), 0.2);
  ASSERT_EQ(flat.metrics.fidelity_steps, kFidelitySteps);
  CommConfig by_node = compressed(Compression::kPowerSgd, 5, 4);
  by_node.algorithm = Algorithm::kHierarchical;
  EXPECT_EQ(numerics_key(by_node, 1), numerics_key(flat.config, 1));
  const GuardPlan plan = guard_.before(by_node, TrialMode::kDdp, true);
  EXPECT_EQ(plan.fidelity_steps, 0);  // nothing trained again
  EXPECT_EQ(plan.trajectory_steps, 0);
  const Measured hierarchical = search(2, by_node, 0.15);
  EXPECT_EQ(hierarchical.metrics.fidelity_trial, 1);
  EXPECT_EQ(hierarchical.metrics.trajectory_trial, 1);
  EXPECT_EQ(hierarchical.metrics.trajectory, flat.metrics.trajectory);
  // and the family is measured: no first point for it
  space_.powersgd_ranks = {4};
  for (const Point& p : guard_.first_points(space_)) {
    EXPECT_FALSE(info(space_.config_at(p).compression).ranked) << space_.config_at(p).describe();
  }
}

TEST_F(GuardTest, ARejectedNumericsIsNotRunAgainInTheSearchButStillInADecisionPair) {
  give_reference();
  const Measured bad = search(1, compressed(Compression::kPowerSgd), 0.1, 1, /*faithful=*/false);
  EXPECT_EQ(bad.status, TrialStatus::kFailed);
  EXPECT_EQ(bad.ranking_cost, kFailedCost);
  EXPECT_DOUBLE_EQ(bad.step_s, 0.1);  // its step was measured; the guard failed it
  EXPECT_NE(bad.error.find("convergence guard: gradient fidelity"), std::string::npos) << bad.error;
  ASSERT_FALSE(notes_.empty());
  EXPECT_NE(notes_.back().find("rejected by the convergence guard"), std::string::npos) << notes_.back();

  const GuardPlan plan = guard_.before(compressed(Compression::kPowerSgd, 5), TrialMode::kDdp, true);
  EXPECT_TRUE(plan.skip);
  const Measured skipped = search(2, compressed(Compression::kPowerSgd, 5), 0.1);
  EXPECT_EQ(skipped.status, TrialStatus::kFailed);
  EXPECT_EQ(skipped.step_s, kFailedCost);
  EXPECT_EQ(skipped.metrics.fidelity_trial, 1);
  EXPECT_EQ(skipped.metrics.guard["passed"], false);
  EXPECT_NE(skipped.error.find("the verdict on trial 1's window and trajectory, the same numerics; not run"),
            std::string::npos)
      << skipped.error;
  EXPECT_FALSE(guard_.before(compressed(Compression::kPowerSgd, 5), TrialMode::kDdp, false).skip);
}

TEST_F(GuardTest, ACompressedConfigIsRankedByItsStepTimesTheUpperEndOfItsInflation) {
  give_reference();
  EXPECT_EQ(guard_.ranking_factor(compressed(Compression::kFp16, 5)), 1);  // no verdict yet: its step alone
  const Measured fp16 = search(1, compressed(Compression::kFp16), 0.2, 1.5);
  ASSERT_TRUE(fp16.metrics.inflation);
  EXPECT_EQ(fp16.metrics.inflation->kind, InflationKind::kMeasured);
  EXPECT_NEAR(fp16.metrics.inflation->estimate, 1.5, 0.1);
  EXPECT_DOUBLE_EQ(fp16.step_s, 0.2);
  EXPECT_DOUBLE_EQ(fp16.ranking_cost, 0.2 * fp16.metrics.inflation->high);
  EXPECT_EQ(fp16.metrics.guard["data"], "synthetic");
  EXPECT_EQ(fp16.metrics.guard["trajectory_steps"], kSteps);
  // one that needs 2.7x the steps ends above the reference's loss: rejected by the loss check
  const Measured slow = search(2, compressed(Compression::kPowerSgd), 0.1, 2.7);
  EXPECT_EQ(slow.status, TrialStatus::kFailed);
  EXPECT_EQ(slow.ranking_cost, kFailedCost);
  EXPECT_NE(slow.error.find("trajectory loss over the last steps"), std::string::npos) << slow.error;
  // what the model strategy's forecasts are multiplied by (session.cc): the same cost, before a run
  EXPECT_DOUBLE_EQ(guard_.ranking_factor(compressed(Compression::kFp16, 5)), fp16.metrics.inflation->high);
  EXPECT_EQ(guard_.ranking_factor(compressed(Compression::kPowerSgd, 5)), kFailedCost);
  EXPECT_EQ(guard_.ranking_factor(CommConfig{}), 1);
}

TEST_F(GuardTest, ALossCheckFailedWithinItsNoiseIsExtendedAndJudgedAgainOnTheLongerTrajectories) {
  // 60 steps: the lag leaves the tail 0.133 above the reference's, allowed 0.115, with a noise of 0.043
  // (within 2x); by 120 steps it has closed (0.033 above, allowed 0.080).
  lagging_powersgd(0.8, 30);
  give_reference();
  const CommConfig psgd = compressed(Compression::kPowerSgd);
  std::vector<Measured> results{search(1, psgd, 0.1)};
  const Measured& first = results[0];
  EXPECT_EQ(first.status, TrialStatus::kOk) << first.error;  // neither passed nor rejected
  EXPECT_EQ(first.ranking_cost, kFailedCost);                // never ranked while undecided
  EXPECT_EQ(first.metrics.guard["passed"], false);
  EXPECT_EQ(first.metrics.guard["loss"]["within_noise"], true);
  EXPECT_NEAR(first.metrics.guard["loss"]["excess"].get<double>(), 0.133, 0.001);
  EXPECT_NEAR(first.metrics.guard["loss"]["noise"].get<double>(), 0.0426, 0.001);
  EXPECT_NE(first.metrics.guard.value("undecided", "").find("its loss check failed within noise: trajectory loss"),
            std::string::npos)
      << first.metrics.guard.dump();
  ASSERT_FALSE(notes_.empty());
  EXPECT_NE(notes_.back().find("cannot decide on 60 steps (its loss check failed within noise"), std::string::npos)
      << notes_.back();
  EXPECT_NE(notes_.back().find("its trajectories are extended to 120 steps"), std::string::npos) << notes_.back();
  EXPECT_FALSE(guard_.before(compressed(Compression::kPowerSgd, 5), TrialMode::kDdp, true).skip);  // not a rejection

  const auto labels = extend(results, 2);
  ASSERT_EQ(labels.size(), 2u);
  EXPECT_EQ(*guard_.cost_note(100), "convergence guard: 1 gradient-fidelity window(s) of 32 steps (2 s) and 4 loss "
                                    "trajectories of 60 steps, 2 of them extended to 120 (40 s): 42 s of the "
                                    "session's 100 s so far");
  EXPECT_EQ(labels[0], "DDP defaults (the convergence guard's reference, trajectory extended to 120 steps)");
  EXPECT_EQ(labels[1], psgd.describe() + " (the convergence guard: trajectory extended to 120 steps)");
  // Judged again on 120 steps by the same rules: passed, ranked, and the evidence says why it was extended.
  const Measured& again = results[0];
  EXPECT_EQ(again.metrics.trajectory.size(), 120u);
  EXPECT_EQ(again.metrics.guard["passed"], true) << again.metrics.guard.dump();
  EXPECT_EQ(again.metrics.guard["loss"]["steps_compared"], 120);
  EXPECT_FALSE(again.metrics.guard.contains("undecided"));
  EXPECT_EQ(again.metrics.guard["extended"]["from_steps"], 60);
  EXPECT_EQ(again.metrics.guard["extended"]["to_steps"], 120);
  EXPECT_NE(again.metrics.guard["extended"]["why"].get<std::string>().find("loss check failed within noise"),
            std::string::npos);
  ASSERT_TRUE(again.metrics.inflation && again.metrics.inflation->finite_upper());
  EXPECT_DOUBLE_EQ(again.ranking_cost, 0.1 * again.metrics.inflation->high);
  EXPECT_FALSE(guard_.extension(results));
}

TEST_F(GuardTest, ALossCheckThatStillFailsOnTheLongestTrajectoriesRejects) {
  // A lag that does not close: 0.190 above at 60 steps (allowed 0.115, within 2 x 0.043 of it), 0.208
  // above at 120 (allowed 0.080): the cap (2T) reached, the failure stands.
  lagging_powersgd(0.2, INFINITY);
  give_reference();
  std::vector<Measured> results{search(1, compressed(Compression::kPowerSgd), 0.1)};
  EXPECT_TRUE(results[0].metrics.guard.contains("undecided"));
  EXPECT_EQ(extend(results, 2).size(), 2u);
  const Measured& m = results[0];
  EXPECT_EQ(m.status, TrialStatus::kFailed);
  EXPECT_EQ(m.ranking_cost, kFailedCost);
  EXPECT_EQ(m.error.rfind("convergence guard: trajectory loss over the last steps", 0), 0u) << m.error;
  EXPECT_FALSE(m.metrics.guard.contains("undecided"));
  EXPECT_EQ(m.metrics.guard["extended"]["to_steps"], 120);
  EXPECT_TRUE(guard_.before(compressed(Compression::kPowerSgd, 5), TrialMode::kDdp, true).skip);
}

TEST_F(GuardTest, AClearLossFailureIsNotExtendedNorIsOneWhoseExtensionTheBudgetDeclined) {
  lagging_powersgd(0.5, INFINITY);  // 0.49 above, allowed 0.115, noise 0.043: decided on 60 steps
  give_reference();
  std::vector<Measured> results{search(1, compressed(Compression::kPowerSgd, 25, 4), 0.1)};
  EXPECT_EQ(results[0].status, TrialStatus::kFailed);
  EXPECT_FALSE(results[0].metrics.guard.contains("undecided"));
  EXPECT_FALSE(guard_.extension(results));

  lagging_powersgd(0.2, INFINITY);  // within noise on 60 steps, but the budget declines the extension
  results.push_back(search(2, compressed(Compression::kPowerSgd, 25, 16), 0.1));
  ASSERT_TRUE(results[1].metrics.guard.contains("undecided"));
  const auto first = guard_.extension(results);
  ASSERT_TRUE(first);
  // The reference's run comes first and says what both runs take (10 s per 60 steps each, to 120),
  // so that the budget declines them together rather than after the reference ran.
  EXPECT_FALSE(first->search);
  EXPECT_DOUBLE_EQ(first->expected_s, 20.0 + 20.0);
  guard_.decline("the time budget of 1 min");
  EXPECT_NE(notes_.back().find("are not extended: the time budget of 1 min"), std::string::npos) << notes_.back();
  EXPECT_FALSE(guard_.extension(results));  // judges it again: without more evidence the failure stands
  EXPECT_EQ(results[1].status, TrialStatus::kFailed);
  EXPECT_EQ(results[1].metrics.guard["extended"]["declined"], "the time budget of 1 min");
  EXPECT_FALSE(results[1].metrics.guard.contains("undecided"));
}

TEST_F(GuardTest, AWideInflationIsExtendedWhereTheStepWouldPayAtTheLeastInflationItsIntervalAllows) {
  // A lag of 0.2 that closes slowly (e-folding 40 steps): on 60 steps the loss check passes and the
  // inflation is 1.22x [0.97, 1.37]; the bar is 1 (the reference is the fastest exact step, 0.4 s).
  lagging_powersgd(0.2, 40);
  give_reference();
  // 1.15x faster a step: it pays at inflation 1 (the interval's least, its lower end taken no lower
  // than 1), not at its upper end; not at the point estimate either, which is why that is not the test.
  std::vector<Measured> results{search(1, compressed(Compression::kPowerSgd, 25, 16), 0.4 / 1.15)};
  const Inflation& i = *results[0].metrics.inflation;
  ASSERT_LT(i.low, 1.0) << i.describe();
  ASSERT_GT(i.estimate, 1.15) << i.describe();
  ASSERT_LT(i.high, 1.15 * 1.3) << i.describe();
  EXPECT_EQ(results[0].ranking_cost, kFailedCost);  // never ranked while undecided
  EXPECT_NE(results[0].metrics.guard.value("undecided", "").find("1.15x effective at the least inflation the "
                                                                  "interval allows (1.00: its lower end, no lower than 1)"),
            std::string::npos)
      << results[0].metrics.guard.dump();
  // The bar is the search's (the decision's pairs may measure another later): the verdict says which.
  EXPECT_NE(results[0].metrics.guard.value("undecided", "").find("against the search's bar of 1.00"), std::string::npos)
      << results[0].metrics.guard.dump();
  EXPECT_EQ(extend(results, 2).size(), 2u);  // the reference's trajectory, then the numerics', to 120 steps
  EXPECT_EQ(results[0].metrics.guard["extended"]["to_steps"], 120);
  EXPECT_EQ(results[0].metrics.guard["trajectory_steps"], 120);

  // A step slower than the bar is decided at once, whatever the interval's lower end: here the gap
  // closes within a few steps, 0.93x [0.84, 1.17] on 60 steps, and the step is 0.95x the reference's
  // (the point estimate 0.93 would have asked for more evidence).
  lagging_powersgd(0.2, 5);
  results.push_back(search(4, compressed(Compression::kPowerSgd, 25, 4), 0.4 / 0.95));
  const Measured& slow = results[1];
  ASSERT_LT(slow.metrics.inflation->estimate, 0.95) << slow.metrics.inflation->describe();
  EXPECT_FALSE(slow.metrics.guard.contains("undecided")) << slow.metrics.guard.dump();
  EXPECT_DOUBLE_EQ(slow.ranking_cost, slow.step_s * slow.metrics.inflation->high);
  EXPECT_FALSE(guard_.extension(results));
}

TEST_F(GuardTest, ANearExactNumericsIsBoundByItsFidelityWindowWhereItsTrajectoriesAgree) {
  give_reference();
  // fp16 as measured on resnet18: every step's gradient within 0.14% of the exact one.
  const auto near_exact = [this](int64_t ordinal, const CommConfig& config, double stretch) {
    const GuardPlan plan = guard_.before(config, TrialMode::kDdp, true);
    Measured m = ran(ordinal, config, plan, 0.2, stretch);
    m.metrics.fidelity_step_cosine_min = 0.999999;
    m.metrics.fidelity_norm_error = 3.5e-6;
    guard_.after(plan, true, m);
    return m;
  };
  const Measured fp16 = near_exact(1, compressed(Compression::kFp16), 1.0);
  ASSERT_TRUE(fp16.metrics.inflation);
  const Inflation& i = *fp16.metrics.inflation;
  const double e = std::sqrt(2 * (1 - 0.999999));
  EXPECT_DOUBLE_EQ(i.estimate, 1.0);
  EXPECT_NEAR(i.gradient_error, e, 1e-12);
  EXPECT_NEAR(i.high, (1 + e) / (1 - e), 1e-12);
  EXPECT_NEAR(i.low, (1 - e) / (1 + e), 1e-12);
  EXPECT_DOUBLE_EQ(fp16.ranking_cost, 0.2 * i.high);
  EXPECT_TRUE(fp16.metrics.guard.contains("trajectory_inflation")) << fp16.metrics.guard.dump();
  EXPECT_NE(i.describe().find("near-exact"), std::string::npos) << i.describe();
  // Trajectories that contradict the bound (1.5x the steps, interval above 1) keep their own verdict.
  const Measured bf16 = near_exact(2, compressed(Compression::kBf16), 1.5);
  ASSERT_TRUE(bf16.metrics.inflation);
  EXPECT_EQ(bf16.metrics.inflation->gradient_error, 0);
  EXPECT_NEAR(bf16.metrics.inflation->estimate, 1.5, 0.1);
  EXPECT_FALSE(bf16.metrics.guard.contains("trajectory_inflation"));
}

TEST_F(GuardTest, ANearExactNumericsLossCheckFailureIsOverruledOnlyWhereItsTrajectoriesAgree) {
  // The compressed runs end 0.4 above the reference over the last quarter (the check allows 0.115):
  // a clear failure, far outside the tails' noise. stretch: how many times the reference's steps the
  // compressed run needs to reach the target, a third of the way.
  double stretch = 1;
  curves_ = [&stretch](const CommConfig& config, int steps) {
    std::vector<double> losses = curve(changes_numerics(config) ? stretch : 1, steps);
    if (changes_numerics(config)) {
      for (int t = steps * 3 / 4; t < steps; ++t) losses[t] += 0.4;
    }
    return losses;
  };
  give_reference();
  const auto measured = [this](int64_t ordinal, const CommConfig& config, bool near_exact) {
    const GuardPlan plan = guard_.before(config, TrialMode::kDdp, true);
    Measured m = ran(ordinal, config, plan, 0.2);
    m.metrics.trajectory = curves_(config, plan.trajectory_steps);
    m.metrics.fidelity_step_cosine_min = near_exact ? 0.999999 : 0.99;  // e = 0.0014, or 0.14
    m.metrics.fidelity_norm_error = near_exact ? 3.5e-6 : 0.01;
    guard_.after(plan, true, m);
    return m;
  };
  // Near-exact, the trajectories reach the target together: overruled, ranked on its bound.
  const Measured fp16 = measured(1, compressed(Compression::kFp16), true);
  EXPECT_EQ(fp16.status, TrialStatus::kOk) << fp16.error;
  ASSERT_TRUE(fp16.metrics.guard["passed"].get<bool>()) << fp16.metrics.guard.dump();
  EXPECT_FALSE(fp16.metrics.guard["loss"]["passed"].get<bool>());
  const std::string why = fp16.metrics.guard["loss"]["overruled"].get<std::string>();
  EXPECT_NE(why.find("within 0.0014 of the exact one"), std::string::npos) << why;
  EXPECT_NE(why.find("includes 1"), std::string::npos) << why;
  EXPECT_FALSE(fp16.metrics.guard.contains("reason"));
  ASSERT_TRUE(fp16.metrics.inflation);
  EXPECT_DOUBLE_EQ(fp16.ranking_cost, 0.2 * fp16.metrics.inflation->high);
  EXPECT_NE(notes_.back().find("its loss check failed (trajectory loss over the last steps"), std::string::npos)
      << notes_.back();
  EXPECT_NE(notes_.back().find("overruled: every step's gradient"), std::string::npos) << notes_.back();
  // Not near-exact (PowerSGD's e = 0.14), the same curves: rejected.
  const Measured powersgd = measured(2, compressed(Compression::kPowerSgd), false);
  EXPECT_EQ(powersgd.status, TrialStatus::kFailed);
  EXPECT_EQ(powersgd.ranking_cost, kFailedCost);
  EXPECT_FALSE(powersgd.metrics.guard["loss"].contains("overruled"));
  // Near-exact, but its trajectories need 1.5x the steps (an interval above 1): rejected.
  stretch = 1.5;
  const Measured bf16 = measured(3, compressed(Compression::kBf16), true);
  EXPECT_EQ(bf16.status, TrialStatus::kFailed);
  EXPECT_EQ(bf16.error.rfind("convergence guard: trajectory loss over the last steps", 0), 0u) << bf16.error;
  EXPECT_FALSE(bf16.metrics.guard["loss"].contains("overruled"));
}

TEST_F(GuardTest, TheCandidatesBarAndTheNoteOnAFasterStepRankedLower) {
  give_reference();
  Measured defaults;
  defaults.status = TrialStatus::kOk;
  defaults.step_s = defaults.ranking_cost = defaults.metrics.p50_s = 0.4;
  Measured buckets = defaults;
  buckets.config.bucket_cap_mb = 5;
  buckets.step_s = buckets.ranking_cost = buckets.metrics.p50_s = 0.32;
  const Measured fp16 = search(3, compressed(Compression::kFp16), 0.2, 2.4);
  const std::vector<Measured> results{defaults, buckets, fp16};
  EXPECT_EQ(best_exact(results), &results[1]);
  const CandidateEvidence e = guard_.evidence_for(results[2], results);
  EXPECT_DOUBLE_EQ(e.bar, 0.4 / 0.32);
  EXPECT_NEAR(e.inflation.estimate, 2.4, 0.2);
  EXPECT_DOUBLE_EQ(guard_.evidence_for(results[1], results).bar, 1);
  const std::string note = guard_.fastest_step_note(results[1], results);
  EXPECT_EQ(note.rfind("; the fastest step, bucket 25 MiB, allreduce, fp16 (200.0 ms), was ranked lower: its step "
                       "inflation is 2.",
                       0),
            0u)
      << note;
  EXPECT_EQ(guard_.fastest_step_note(results[2], results), "");
}

TEST_F(GuardTest, ItsCostCountsWhatTheWorkersTimedInThisRunOnly) {
  EXPECT_FALSE(guard_.cost_note(1));
  give_reference();
  search(1, compressed(Compression::kFp16), 0.2);
  search(2, compressed(Compression::kFp16, 5), 0.2);  // carried: nothing timed
  const auto note = guard_.cost_note(100);
  ASSERT_TRUE(note);
  EXPECT_EQ(*note, "convergence guard: 1 gradient-fidelity window(s) of 32 steps (2 s) and 2 loss trajectories of "
                   "60 steps (20 s): 22 s of the session's 100 s so far");
}

}  // namespace
}  // namespace acspeed::tuner
