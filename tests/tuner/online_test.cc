// The online tuner (online.h) driven with synthetic window times, as the job's hook engine drives it:
// search, pairs, early drop, settle; the knob rows it reads; its evidence judged again offline.
#include "acspeed/tuner/online.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <set>
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "../support/error_text.h"
#include "../support/scoped_env.h"
#include "acspeed/error.h"
#include "acspeed/tuner/knobs.h"
#include "acspeed/tuner/trial_metrics.h"
#include "decision_rule.h"

namespace acspeed::tuner {
namespace {

using testing::ScopedEnv;
const auto error_of = testing::invalid_argument_text;

// A window's step time (s) for a config at window index k; every step gets +-1% seeded noise.
using StepFn = std::function<double(const CommConfig&, int k)>;

struct Drive {
  int windows = 0;  // windows measured before the settled one
  int steps = 0;    // exploration steps
};

// Runs the job as the Python side would under the one-collective protocol: windows 0..lookahead are
// planned first; at the end of window k its times are pushed and window k + lookahead + 1 planned.
Drive drive(OnlineTuner& tuner, const StepFn& step, int lookahead, int limit = 200) {
  std::mt19937_64 noise(7);
  std::uniform_real_distribution<double> jitter(0.99, 1.01);
  for (int k = 0; k <= lookahead; ++k) tuner.window(k);
  Drive run;
  for (int k = 0; k < limit; ++k) {
    const WindowPlan plan = tuner.window(k);
    if (plan.settled) return run;
    std::vector<double> times;
    for (int i = 0; i < plan.steps; ++i) times.push_back(step(plan.config, k) * jitter(noise));
    tuner.push(k, times);
    tuner.window(k + lookahead + 1);
    ++run.windows;
    run.steps += plan.steps;
  }
  ADD_FAILURE() << "the online tuner did not settle within " << limit << " windows";
  return run;
}

// Two nodes of two ranks, a CPU: bucket 5,25 x allreduce,reduce_scatter,hierarchical x streams 1,2.
OnlineSpace two_nodes() { return online_space(nlohmann::json::object(), 4, 2, false); }

// The baseline's step is 1 s; 2 streams 0.7 s; reduce_scatter clearly slower; the rest as the baseline.
double streams_win(const CommConfig& c, int) {
  if (c.algorithm == Algorithm::kReduceScatter) return 1.3;
  return c.streams == 2 ? 0.7 : 1.0;
}

OnlineOptions options(int lookahead) {
  OnlineOptions o;
  o.seed = 3;
  o.lookahead = lookahead;
  return o;
}

TEST(KnobRows, SayWhichKnobsALiveJobCanSwitch) {
  std::set<std::string> switchable;
  for (const auto& knob : knobs()) {
    if (knob.switchable) switchable.insert(knob.name);
    EXPECT_FALSE(knob.switchable && knob.before_communicator) << knob.name << ": an instance knob is never switched";
  }
  // The NCCL rules (chunk size included) reach a live job through the plugin's rules setter.
  EXPECT_EQ(switchable, (std::set<std::string>{"bucket_mb", "algorithm", "streams", "nccl_algorithm", "nccl_protocol",
                                               "nccl_channels", "nccl_chunk_bytes"}));
  // A DDP argument is the config's own key: a job's argument reads as a config.
  const nlohmann::json config = CommConfig{};
  std::set<std::string> arguments;
  for (const auto& knob : knobs()) {
    if (knob.ddp_argument.empty()) continue;
    arguments.insert(knob.ddp_argument);
    EXPECT_TRUE(config.contains(knob.ddp_argument)) << knob.ddp_argument;
  }
  EXPECT_EQ(arguments, (std::set<std::string>{"bucket_cap_mb", "gradient_as_bucket_view"}));
}

TEST(OnlineSpace, SearchesTheSwitchableKnobsAtTheOfflineDefaultsAroundTheJobsOwnDdp) {
  const OnlineSpace s = two_nodes();
  EXPECT_TRUE(s.baseline.is_default());
  EXPECT_EQ(s.space.bucket_mb, (std::vector<double>{5, 25}));
  EXPECT_EQ(s.space.algorithms.size(), 3u);
  EXPECT_EQ(s.space.streams, (std::vector<int>{1, 2}));
  EXPECT_EQ(s.space.compression, (std::vector<Compression>{Compression::kNone}));
  EXPECT_EQ(s.space.grad_as_bucket_view, (std::vector<bool>{false}));
  EXPECT_EQ(s.space.size(), 12u);
  // One node: no algorithm that works node by node; nor on nodes of one rank (it would be allreduce).
  EXPECT_EQ(online_space(nlohmann::json::object(), 2, 1, false).space.algorithms.size(), 2u);
  EXPECT_EQ(online_space(nlohmann::json::object(), 2, 2, false).space.algorithms,
            (std::vector<Algorithm>{Algorithm::kAllreduce, Algorithm::kReduceScatter}));
}

TEST(OnlineSpace, TheJobsDdpArgumentsAndAcspeedPinsAreNeverSearched) {
  const OnlineSpace s = online_space({{"bucket_cap_mb", 50}, {"gradient_as_bucket_view", true}}, 4, 2, false);
  EXPECT_EQ(s.space.bucket_mb, (std::vector<double>{50}));
  EXPECT_EQ(s.space.grad_as_bucket_view, (std::vector<bool>{true}));
  EXPECT_EQ(s.baseline.bucket_cap_mb, 50);
  EXPECT_EQ(s.baseline.gradient_as_bucket_view, true);
  EXPECT_NE(std::find(s.space.pinned.begin(), s.space.pinned.end(), "bucket_mb (DDP argument bucket_cap_mb)"),
            s.space.pinned.end());

  ScopedEnv streams("ACSPEED_STREAMS", "2");
  ScopedEnv compression("ACSPEED_COMPRESSION", "fp16");
  const OnlineSpace pinned = two_nodes();
  EXPECT_EQ(pinned.space.streams, (std::vector<int>{2}));
  // With a pinned compression the baseline is that compression at DDP's other defaults.
  EXPECT_EQ(pinned.baseline.compression, Compression::kFp16);
  EXPECT_EQ(pinned.baseline.streams, 2);
  EXPECT_EQ(pinned.space.size(), 6u);

  const std::string error = error_of([] { online_space({{"find_unused_parameters", true}}, 4, 2, false); });
  EXPECT_NE(error.find("'find_unused_parameters'"), std::string::npos) << error;
  EXPECT_NE(error.find("bucket_cap_mb, gradient_as_bucket_view"), std::string::npos) << error;
  EXPECT_NE(error_of([] { online_space({{"bucket_cap_mb", -1}}, 4, 2, false); }).find("bucket_cap_mb"),
            std::string::npos);
}

TEST(OnlineSpace, AJobThatCannotRebuildItsReducerHoldsItsBucketSize) {
  const OnlineSpace s = online_space(nlohmann::json::object(), 4, 2, false, /*rebuild_reducer=*/false);
  EXPECT_EQ(s.space.bucket_mb.size(), 1u);
  EXPECT_EQ(s.baseline, two_nodes().baseline);
  EXPECT_EQ(s.space.size(), 6u);  // algorithms x streams
  EXPECT_NE(std::find(s.space.pinned.begin(), s.space.pinned.end(),
                      "bucket_mb (switching it rebuilds DDP's reducer, which this job cannot do)"),
            s.space.pinned.end());
}

TEST(OnlineTuner, SearchesPairsDropsTheClearlySlowerAndSettlesOnTheFasterConfig) {
  OnlineOptions o = options(2);
  o.warmup_steps = 10;
  OnlineTuner tuner(two_nodes(), o);
  const Drive run = drive(tuner, streams_win, 2);
  ASSERT_TRUE(tuner.settled());
  EXPECT_EQ(tuner.decision().streams, 2);
  EXPECT_NE(tuner.decision().algorithm, Algorithm::kReduceScatter);
  ASSERT_TRUE(tuner.speedup().has_value());
  EXPECT_NEAR(*tuner.speedup(), 1 / 0.7, 0.05);
  EXPECT_GT(*tuner.ci_low(), 1.3);
  EXPECT_LE(run.windows, 48);
  EXPECT_LE(run.steps, tuner.max_exploration_steps());

  const auto& windows = tuner.windows();
  std::map<int, std::vector<const WindowRecord*>> by_pair;
  int waits = 0;
  for (const auto& w : windows) {
    if (w.pair >= 0) by_pair[w.pair].push_back(&w);
    // A switch disturbs the window's first steps: run, not measured.
    const size_t before = w.plan.index == 0 ? tuner.space().space.ordinal_of(tuner.space().space.default_point())
                                            : windows[static_cast<size_t>(w.plan.index) - 1].plan.ordinal;
    // Windows tile the job's steps after the warm-up: each starts where the one before ended.
    EXPECT_EQ(w.plan.first_step, w.plan.index == 0 ? 10
                                                   : windows[static_cast<size_t>(w.plan.index) - 1].plan.first_step +
                                                         windows[static_cast<size_t>(w.plan.index) - 1].plan.steps)
        << "window " << w.plan.index;
    if (w.plan.settled) continue;
    if (w.phase == "wait") {  // the config before it, a few steps, in no pair, never used
      EXPECT_EQ(w.plan.ordinal, before) << "window " << w.plan.index;
      EXPECT_EQ(w.plan.steps, 2);
      EXPECT_EQ(w.plan.discard, 0);
      EXPECT_EQ(w.pair, -1);
      EXPECT_FALSE(w.used);
      ++waits;
      continue;
    }
    EXPECT_EQ(w.plan.discard, before == w.plan.ordinal ? 0 : 2) << "window " << w.plan.index;
    EXPECT_EQ(w.plan.steps, 10 + w.plan.discard);
    if (w.pushed) {
      EXPECT_EQ(w.step_times_s.size(), 10u);
    }
  }
  // Lookahead 2: every candidate's pair (the decision's three pairs as one) is followed by at most
  // two waits, never by a pair of the same candidate that no statistic uses.
  EXPECT_GE(waits, 2);
  EXPECT_LE(waits, 2 * static_cast<int>(tuner.evidence()["search"]["measured"].get<size_t>() + 1));
  // Each pair: one candidate and one baseline window, adjacent; the order alternates pair by pair.
  for (const auto& [pair, ws] : by_pair) {
    if (ws.size() < 2) continue;  // abandoned after a drop
    ASSERT_EQ(ws.size(), 2u);
    EXPECT_EQ(ws[1]->plan.index, ws[0]->plan.index + 1);
    EXPECT_NE(ws[0]->plan.role, ws[1]->plan.role);
    EXPECT_EQ(ws[0]->plan.role == WindowRole::kCandidate, pair % 2 == 1) << "pair " << pair;
    EXPECT_TRUE(ws[0]->plan.role == WindowRole::kCandidate ? ws[1]->plan.config == tuner.space().baseline
                                                           : ws[0]->plan.config == tuner.space().baseline);
  }
  // reduce_scatter was dropped after its first window: no second pair ran it, at most the wait after it.
  int reduce_scatter_windows = 0, reduce_scatter_waits = 0;
  for (const auto& w : windows) {
    if (w.plan.config.algorithm != Algorithm::kReduceScatter || !w.pushed) continue;
    EXPECT_TRUE(w.phase == "search" || w.phase == "wait") << w.phase;
    ++(w.phase == "search" ? reduce_scatter_windows : reduce_scatter_waits);
  }
  EXPECT_EQ(reduce_scatter_windows, 1);
  EXPECT_LE(reduce_scatter_waits, 1);
  const nlohmann::json evidence = tuner.evidence();
  EXPECT_EQ(evidence["online"]["warmup_steps"], 10);
  ASSERT_EQ(evidence["online"]["dropped"].size(), 1u);
  EXPECT_NE(evidence["online"]["dropped"][0].get<std::string>().find("reduce_scatter"), std::string::npos);
  EXPECT_EQ(evidence["pairs"].size(), 3u);
  // Stored as trials with the offline roles: the decision's pairs as candidate/baseline.
  int candidates = 0, baselines = 0;
  for (const auto& w : windows) {
    if (!w.used || w.phase != "decision") continue;
    (w.trial_role() == TrialRole::kCandidate ? candidates : baselines)++;
    EXPECT_TRUE(w.trial_role() == TrialRole::kCandidate || w.trial_role() == TrialRole::kBaseline);
  }
  EXPECT_EQ(candidates, 3);
  EXPECT_EQ(baselines, 3);
  // Settled: every later window runs the decision and is never pushed.
  const WindowPlan after = tuner.window(static_cast<int>(windows.size()));
  EXPECT_TRUE(after.settled);
  EXPECT_EQ(after.config, tuner.decision());
}

TEST(OnlineTuner, WithoutLookaheadADroppedCandidateRunsOneWindowOnly) {
  OnlineTuner tuner(two_nodes(), options(0));
  drive(tuner, streams_win, 0);
  ASSERT_TRUE(tuner.settled());
  EXPECT_EQ(tuner.decision().streams, 2);
  int reduce_scatter = 0;
  for (const auto& w : tuner.windows()) reduce_scatter += w.plan.config.algorithm == Algorithm::kReduceScatter;
  EXPECT_EQ(reduce_scatter, 1);
}

TEST(OnlineTuner, ACandidateFasterFromWindowFiveIsChosenWithThreePairs) {
  // X: the first config a candidate window runs from window 5 on; from then on it takes 0.6 s.
  std::set<std::string> before_five;
  std::optional<CommConfig> x;
  const CommConfig baseline = two_nodes().baseline;
  const StepFn step = [&](const CommConfig& c, int k) {
    if (c == baseline) return 1.0;
    if (k < 5) {
      before_five.insert(c.describe());
      return 1.0;
    }
    if (!x && !before_five.count(c.describe())) x = c;
    return x && c == *x ? 0.6 : 1.0;
  };
  OnlineTuner tuner(two_nodes(), options(2));
  drive(tuner, step, 2);
  ASSERT_TRUE(x.has_value());
  ASSERT_TRUE(tuner.settled());
  EXPECT_EQ(tuner.decision(), *x) << tuner.note();
  const nlohmann::json evidence = tuner.evidence();
  EXPECT_GE(evidence["pairs"].size(), 3u);
  for (const auto& speedup : evidence["pair_speedups"]) EXPECT_GT(speedup.get<double>(), 1.5);
  EXPECT_GT(*tuner.ci_low(), 1);
}

TEST(OnlineTuner, KeepsTheJobsDdpWhenNothingIsFaster) {
  OnlineTuner tuner(two_nodes(), options(2));
  drive(tuner, [](const CommConfig&, int) { return 1.0; }, 2);
  ASSERT_TRUE(tuner.settled());
  EXPECT_EQ(tuner.decision(), tuner.space().baseline);
  EXPECT_NE(tuner.note().find("keep"), std::string::npos) << tuner.note();
}

TEST(OnlineTuner, NothingToTuneSettlesAtOnce) {
  ScopedEnv algorithm("ACSPEED_ALGORITHM", "allreduce");
  ScopedEnv streams("ACSPEED_STREAMS", "1");
  OnlineTuner tuner(online_space({{"bucket_cap_mb", 25}}, 4, 2, false), options(2));
  EXPECT_TRUE(tuner.window(0).settled);
  EXPECT_TRUE(tuner.decision().is_default());
  EXPECT_NE(tuner.note().find("nothing to tune"), std::string::npos) << tuner.note();
}

// The offline judge (decision_rule.h) reads an online session's evidence and reaches its verdict (the
// online flag only words its advice for a job, where nothing reruns).
void expect_offline_judge_agrees(const OnlineTuner& tuner) {
  const nlohmann::json evidence = nlohmann::json::parse(tuner.evidence().dump());
  const auto candidate = evidence["candidate"].get<CommConfig>();
  const auto pairs = evidence["pairs"].get<std::vector<PairRun>>();
  const Verdict offline =
      judge(candidate, pairs, "", RuleOptions{0.05, evidence["seed"].get<uint64_t>(), /*online=*/true});
  EXPECT_EQ(offline.accepted ? candidate : tuner.space().baseline, tuner.decision());
  EXPECT_EQ(offline.speedup, tuner.speedup());
  EXPECT_EQ(offline.ci_low, tuner.ci_low());
  EXPECT_EQ(offline.note, tuner.note());
  EXPECT_EQ(nlohmann::json(offline.speedups), evidence["speedups"]);
}

TEST(OnlineTuner, ItsEvidenceGivesTheOfflineJudgesVerdict) {
  OnlineTuner accepted(two_nodes(), options(2));
  drive(accepted, streams_win, 2);
  ASSERT_TRUE(accepted.settled());
  ASSERT_FALSE(accepted.decision() == accepted.space().baseline);
  expect_offline_judge_agrees(accepted);

  // 2 streams look 8% faster in the search, then no faster in the decision's pairs: rejected.
  OnlineTuner rejected(two_nodes(), options(2));
  int decision_windows = 0;
  drive(rejected,
        [&](const CommConfig& c, int k) {
          const bool decision = rejected.windows()[static_cast<size_t>(k)].phase == "decision";
          decision_windows += decision;
          if (c.streams != 2) return 1.0;
          return decision ? (k % 4 < 2 ? 0.97 : 1.03) : 0.92;
        },
        2);
  ASSERT_TRUE(rejected.settled());
  EXPECT_GT(decision_windows, 0);
  EXPECT_EQ(rejected.decision(), rejected.space().baseline);
  EXPECT_NE(rejected.note().find("keep DDP defaults: candidate"), std::string::npos) << rejected.note();
  expect_offline_judge_agrees(rejected);
}

// A stored session of `signature` on `nnodes` nodes; with_model: its compute-only and calibration trials.
int64_t stored_session(Store& store, const std::string& signature, int nnodes, const std::string& precision,
                       bool with_model) {
  SessionRecord session;
  session.instance_type = "box";
  session.model_signature = signature;
  session.precision = precision;
  session.world_size = 2 * nnodes;
  session.nnodes = nnodes;
  const int64_t id = store.create_session(session);
  if (!with_model) return id;
  TrialMetrics compute;
  compute.p50_s = 0.1;
  compute.forward_s = 0.03;
  compute.optimizer_s = 0.01;
  TrialMetrics hooked;
  hooked.p50_s = 0.5;
  hooked.bucket_count = 3;
  hooked.bucket_bytes = 46'800'000;
  hooked.comm_s = 0.38;
  for (const auto& [role, metrics] : {std::pair{TrialRole::kCompute, compute}, std::pair{TrialRole::kCalibration, hooked}}) {
    TrialRecord trial;
    trial.session_id = id;
    trial.role = role;
    trial.config_json = config_to_json(CommConfig{});
    trial.step_times_s = {metrics.p50_s};
    trial.metrics_json = metrics_to_json(metrics);
    store.add_trial(trial);
  }
  return id;
}

// A store in a fresh temporary folder, removed with it.
class TempStore {
 public:
  TempStore() {
    char pattern[] = "/tmp/acspeed-online-test-XXXXXX";
    if (mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
    StoreOptions options;
    options.path = dir_ + "/acspeed.db";
    store_ = Store::open(options);
  }
  ~TempStore() {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  Store& operator*() { return *store_; }
  Store* operator->() { return store_.get(); }

 private:
  std::string dir_;
  std::unique_ptr<Store> store_;
};

TEST(OnlineStepModel, ComesFromAStoredSessionOfTheSameModelInstanceTypeAndNodeCount) {
  {
    TempStore store;
    stored_session(*store, "sig-a", 2, "fp32", true);
    stored_session(*store, "sig-a", 2, "amp", false);  // newer, but no compute step: not a model
    stored_session(*store, "sig-b", 2, "fp32", false);
    const auto model = online_step_model(*store, "box", "sig-a", "amp", 2);
    ASSERT_TRUE(model.has_value());
    EXPECT_DOUBLE_EQ(*model->compute_s, 0.1);
    EXPECT_EQ(*model->payload_bytes, 46'800'000);
    EXPECT_FALSE(online_step_model(*store, "box", "sig-a", "fp32", 1).has_value());  // another node count
    EXPECT_FALSE(online_step_model(*store, "box", "sig-b", "fp32", 2).has_value());  // no model stored
    EXPECT_FALSE(online_step_model(*store, "other", "sig-a", "fp32", 2).has_value());
  }
}

TEST(OnlineStore, ASettledTunerIsASessionOfKindOnlineThatNeverDeactivatesAnOfflineDecision) {
  {
    TempStore store;
    OnlineTuner tuner(two_nodes(), options(2));
    OnlineJob job;
    job.key = {"box", "sig-a", "fp32", 2, 2, false};
    job.model_name = "pkg.net.Net";
    job.batch_size = 16;
    job.torch_version = "2.15.0";
    EXPECT_THROW(store_online(*store, tuner, job), Error);  // not settled: nothing unproven is stored
    const Drive run = drive(tuner, streams_win, 2);
    const StoredOnline first = store_online(*store, tuner, job);
    EXPECT_TRUE(first.active) << first.inactive_because;
    const auto session = store->session(first.session_id);
    ASSERT_TRUE(session.has_value());
    EXPECT_EQ(session->kind, SessionKind::kOnline);
    EXPECT_EQ(session->status, SessionStatus::kDone);
    EXPECT_EQ(session->batch_size, 16);
    const auto trials = store->trials(first.session_id);
    EXPECT_EQ(static_cast<int>(trials.size()), run.windows);  // every pushed window, as a trial
    // The decision's 3 pairs; the waits run while their results were awaited (lookahead 2) are search trials.
    EXPECT_EQ(std::count_if(trials.begin(), trials.end(), [](const auto& t) { return t.role == TrialRole::kCandidate; }),
              3);
    const auto decision = store->active_decision(job.key);
    ASSERT_TRUE(decision.has_value());
    EXPECT_EQ(decision->id, first.decision_id);
    EXPECT_EQ(decision->config.streams, 2);
    EXPECT_EQ(decision->model_name, "pkg.net.Net");

    // An offline decision for the key becomes active over it (as any new decision); a later online
    // one is stored inactive and says which decision holds the key.
    Decision offline = *decision;
    offline.session_id.reset();
    offline.config = CommConfig{};
    const int64_t offline_id = store->add_decision(offline, true);
    const StoredOnline second = store_online(*store, tuner, job);
    EXPECT_FALSE(second.active);
    EXPECT_EQ(second.inactive_because, fmt::format("decision #{} (imported) is active for this key", offline_id));
    EXPECT_EQ(store->active_decision(job.key)->id, offline_id);
  }
}

TEST(OnlineTuner, RefusesWindowsOutOfTurnAndBadTimes) {
  OnlineTuner tuner(two_nodes(), options(2));
  EXPECT_THROW(tuner.window(1), Error);  // window 0 first
  tuner.window(0);
  tuner.window(1);
  tuner.window(2);
  EXPECT_THROW(tuner.window(3), Error);  // needs window 0's result (lookahead 2)
  const int steps = tuner.window(0).steps;
  EXPECT_NE(error_of([&] { tuner.push(0, std::vector<double>(steps + 1, 1.0)); }).find("steps"), std::string::npos);
  std::vector<double> times(steps, 1.0);
  times[3] = -1;
  EXPECT_NE(error_of([&] { tuner.push(0, times); }).find("-1"), std::string::npos);
  EXPECT_THROW(tuner.push(1, std::vector<double>(tuner.window(1).steps, 1.0)), Error);  // window 0 first
  tuner.push(0, std::vector<double>(steps, 1.0));
  EXPECT_NO_THROW(tuner.window(3));
  OnlineOptions bad;
  bad.window_steps = 2;
  EXPECT_NE(error_of([&] { OnlineTuner t(two_nodes(), bad); }).find("window_steps = 2"), std::string::npos);
  bad = OnlineOptions{};
  bad.warmup_steps = -1;
  EXPECT_NE(error_of([&] { OnlineTuner t(two_nodes(), bad); }).find("warmup_steps = -1"), std::string::npos);
}

}  // namespace
}  // namespace acspeed::tuner
