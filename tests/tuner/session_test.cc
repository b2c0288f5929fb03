// The engine without the command line: a whole session against a fake rank 0
// (tests/tuner/fake_worker.py, no torch), a store in a temporary folder and an observer that
// records what it is told.
#include "acspeed/tuner/session.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "acspeed/store.h"
#include "acspeed/tuner/convergence_guard.h"
#include "acspeed/tuner/trial_metrics.h"
#include "node_link.h"

namespace acspeed::tuner {
namespace {

class Recorder : public SessionObserver {
 public:
  void note(const std::string& text) override { notes.push_back(text); }
  void trial_started(int, int planned, const std::string&) override { planned_seen = planned; }
  void trial_finished(const TrialEvent& trial) override { trials.push_back(trial); }
  void search_finished(const std::vector<SearchResult>& r) override { results = r; }

  std::vector<std::string> notes;
  std::vector<TrialEvent> trials;
  std::vector<SearchResult> results;
  int planned_seen = 0;
};

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/acspeed-session-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    StoreOptions store_options;
    store_options.path = dir_ + "/acspeed.db";
    store_ = Store::open(store_options);
    options_ = tune_options_for(false);
    options_.model = "fake";
    options_.python = ACSPEED_FAKE_WORKER;
    options_.warmup = 1;
    options_.steps = 3;
    options_.trajectory_steps = 60;  // the fake worker's loss figures below are for 60 steps
    options_.budget_minutes = 0;
    options_.space.bucket_mb = {25};
    options_.space.streams = {1, 2};
    options_.strategy = "grid";
    options_.seed = 11;
    setenv("ACSPEED_INSTANCE_TYPE", "session-test-box", 1);
  }
  // The session of options_ with a 0.1-minute budget, trial 1 held (FAKE_WORKER_GATE) until 6.5 s after
  // the worker reached it: the budget is spent when trial 1 ends.
  SessionResult run_with_the_budget_spent_by_trial_1(Recorder& recorder) {
    const std::string gate = dir_ + "/gate";
    setenv("FAKE_WORKER_GATE", ("1:" + gate).c_str(), 1);
    options_.budget_minutes = 0.1;  // 6 s
    std::thread release([gate] {
      for (int i = 0; i < 3000 && !std::filesystem::exists(gate + ".reached"); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(6500));
      std::ofstream(gate).put('\n');
    });
    SessionResult result = run_session(options_, *store_, recorder);
    release.join();
    unsetenv("FAKE_WORKER_GATE");
    return result;
  }
  // A compressors session over none and fp16 (1 and 2 streams) with FAKE_WORKER_SLOW=`slow` and, where
  // given, FAKE_WORKER_SPEED=`speed`: it ends done with one decision, returned (its trials: `trials`).
  Decision decide_compressed(const char* slow, const char* speed, Recorder& recorder, size_t* trials = nullptr) {
    setenv("FAKE_WORKER_MODE", "compressors", 1);
    setenv("FAKE_WORKER_SLOW", slow, 1);
    if (speed != nullptr) setenv("FAKE_WORKER_SPEED", speed, 1);
    options_.space.compression = {Compression::kNone, Compression::kFp16};
    options_.compression_searched = true;
    const SessionResult result = run_session(options_, *store_, recorder);
    unsetenv("FAKE_WORKER_SLOW");
    unsetenv("FAKE_WORKER_SPEED");
    EXPECT_EQ(result.status, SessionResult::Status::kDone) << result.error;
    if (trials != nullptr) *trials = store_->trials(result.session_id).size();
    const auto decisions = store_->decisions();
    EXPECT_EQ(decisions.size(), 1u);
    return decisions.empty() ? Decision{} : decisions.front();
  }
  // A session of the fake model on this instance type, as an interrupted tune leaves it (to --resume).
  int64_t stored_session() {
    SessionRecord record;
    record.instance_type = "session-test-box";
    record.model_name = "fake";
    record.model_signature = "p1-0000000000000001";
    record.world_size = 2;
    return store_->create_session(record);
  }
  void TearDown() override {
    unsetenv("FAKE_WORKER_MODE");
    unsetenv("ACSPEED_INSTANCE_TYPE");
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::string dir_;
  std::unique_ptr<Store> store_;
  TuneOptions options_;
};

TEST_F(SessionTest, FasterCandidateIsConfirmedInPairsAndStoredWithItsEvidence) {
  setenv("FAKE_WORKER_MODE", "fast_streams", 1);
  Recorder recorder;
  const SessionResult result = run_session(options_, *store_, recorder);
  ASSERT_EQ(result.status, SessionResult::Status::kDone) << result.error;
  EXPECT_TRUE(result.kept_logs.empty());
  // Two search trials, then 3 pairs (the CPU row's repeats) of candidate and baseline.
  ASSERT_EQ(recorder.trials.size(), 2u + 2u * static_cast<size_t>(options_.repeats));
  EXPECT_EQ(result.trials_stored, static_cast<int64_t>(recorder.trials.size()));
  ASSERT_EQ(recorder.results.size(), 2u);
  EXPECT_EQ(recorder.results.front().config.streams, 2);  // fastest first
  EXPECT_DOUBLE_EQ(recorder.results.front().cost_s, 0.1);
  ASSERT_TRUE(recorder.trials.back().best_config.has_value());
  EXPECT_EQ(recorder.trials.back().best_config->streams, 2);

  const auto decisions = store_->decisions();
  ASSERT_EQ(decisions.size(), 1u);
  const Decision& d = decisions.front();
  EXPECT_TRUE(d.active);
  EXPECT_EQ(d.key.instance_type, "session-test-box");
  EXPECT_EQ(d.key.model_signature, "p1-0000000000000001");
  EXPECT_EQ(d.config.streams, 2);
  ASSERT_TRUE(d.speedup && d.ci_low);
  EXPECT_DOUBLE_EQ(*d.speedup, 2.0);
  EXPECT_GT(*d.ci_low, 1.0);
  EXPECT_NE(d.evidence_json.find("\"pairs\""), std::string::npos);
  EXPECT_FALSE(d.key.gpus_shared);  // no --share-gpus: keyed and labelled as ever
  EXPECT_EQ(d.evidence_json.find("gpus_shared"), std::string::npos);
  EXPECT_EQ(store_->session(result.session_id)->status, SessionStatus::kDone);
  EXPECT_EQ(store_->trials(result.session_id).size(), recorder.trials.size());
}

TEST_F(SessionTest, RanksSharingAGpuStoreADecisionKeyedAndLabelledSo) {
  setenv("FAKE_WORKER_MODE", "fast_streams", 1);
  options_.share_gpus = true;  // what acspeed-tune --share-gpus --nproc-per-node 2 sets on a one-GPU node
  options_.nproc_per_node = 2;
  options_.gpus = 1;
  options_.gpus_shared = true;
  Recorder recorder;
  const SessionResult result = run_session(options_, *store_, recorder);
  ASSERT_EQ(result.status, SessionResult::Status::kDone) << result.error;
  const auto decisions = store_->decisions();
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_TRUE(decisions[0].key.gpus_shared);
  EXPECT_EQ(nlohmann::json::parse(decisions[0].evidence_json)["gpus_shared"],
            (nlohmann::json{{"gpus", 1}, {"ranks_per_node", 2}, {"device", "local rank mod 1"}}));
  DecisionKey own = decisions[0].key;
  own.gpus_shared = false;
  EXPECT_FALSE(store_->active_decision(own, /*any_precision=*/true));  // never for ranks with a GPU each
}

TEST_F(SessionTest, TheConvergenceGuardRejectsAHarmfulCompressorWithItsReasonAndKeepsFp16) {
  setenv("FAKE_WORKER_MODE", "compressors", 1);
  options_.space.bucket_mb = {5, 25};  // two trials per compression: the second reuses the first's window
  options_.space.streams = {1};
  options_.space.compression = {Compression::kNone, Compression::kFp16, Compression::kPowerSgd};
  options_.space.powersgd_ranks = {4};
  options_.compression_searched = true;
  Recorder recorder;
  const SessionResult result = run_session(options_, *store_, recorder);
  ASSERT_EQ(result.status, SessionResult::Status::kDone) << result.error;
  // powersgd was the fastest (3x) but is out: its trial is stored as failed, with the reason and the evidence
  bool rejected = false;
  int not_run = 0;
  std::map<Compression, std::vector<std::pair<int64_t, std::optional<int64_t>>>> windows;  // ordinal, fidelity_trial
  for (const auto& t : store_->trials(result.session_id)) {
    const auto config = config_from_json(t.config_json);
    const auto metrics = metrics_from_json(t.metrics_json);
    if (config.compression != Compression::kNone) {
      EXPECT_EQ(metrics.fidelity_steps, kFidelitySteps) << t.metrics_json;
      windows[config.compression].emplace_back(t.ordinal, metrics.fidelity_trial);
    }
    if (config.compression == Compression::kPowerSgd) {
      rejected = true;
      EXPECT_EQ(t.status, TrialStatus::kFailed);
      EXPECT_NE(t.error.find(fmt::format("convergence guard: gradient fidelity over {} check steps", kFidelitySteps)),
                std::string::npos) << t.error;
      EXPECT_NE(t.error.find("cosine 0.3000"), std::string::npos) << t.error;
      EXPECT_NE(t.error.find("trajectory loss over the last steps 2.3 vs 0.3"), std::string::npos) << t.error;
      EXPECT_EQ(metrics.guard["passed"], false);
      if (metrics.fidelity_trial) {  // the other bucket size: the guard's verdict stands, the trial is not run
        EXPECT_NE(t.error.find(fmt::format("(the verdict on trial {}'s window and trajectory, the same numerics; not run)",
                                           *metrics.fidelity_trial)),
                  std::string::npos) << t.error;
        EXPECT_TRUE(t.step_times_s.empty());
        EXPECT_FALSE(metrics.compression_s) << t.metrics_json;
        ++not_run;
      } else {
        EXPECT_DOUBLE_EQ(metrics.compression_s.value_or(0), 0.004);
      }
    }
    if (config.compression == Compression::kFp16 && t.role == TrialRole::kSearch) {
      EXPECT_EQ(t.status, TrialStatus::kOk);
      EXPECT_EQ(metrics.guard["passed"], true) << t.metrics_json;
    }
  }
  EXPECT_TRUE(rejected);
  EXPECT_EQ(not_run, 1);
  // The window is measured once per numerics: by the first trial of each compression; every later one
  // (the other bucket size, fp16's decision pairs) carries its figures and names it.
  for (const auto& [compression, trials] : windows) {
    ASSERT_GE(trials.size(), 2u) << to_string(compression);
    EXPECT_FALSE(trials.front().second) << to_string(compression);
    for (size_t i = 1; i < trials.size(); ++i) {
      EXPECT_EQ(trials[i].second, trials.front().first) << to_string(compression) << " trial " << trials[i].first;
    }
  }
  const auto decisions = store_->decisions();
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_EQ(decisions.front().config.compression, Compression::kFp16) << decisions.front().note;
  EXPECT_NE(decisions.front().evidence_json.find("\"guard\""), std::string::npos);
}

TEST_F(SessionTest, ACompressedConfigThatNeedsMoreStepsIsRankedOnItsEffectiveSpeedup) {
  // fp16 steps twice as fast but its trajectory needs 2.4x the steps: p50 x inflation is slower than
  // DDP's defaults, so the session keeps them and says why the fastest step was not chosen.
  setenv("FAKE_WORKER_MODE", "compressors", 1);
  setenv("FAKE_WORKER_STRETCH", "fp16:2.4", 1);
  options_.space.bucket_mb = {25};
  options_.space.streams = {1};
  options_.space.compression = {Compression::kNone, Compression::kFp16};
  options_.compression_searched = true;
  Recorder recorder;
  const SessionResult result = run_session(options_, *store_, recorder);
  unsetenv("FAKE_WORKER_STRETCH");
  ASSERT_EQ(result.status, SessionResult::Status::kDone) << result.error;
  bool judged = false;
  for (const auto& t : store_->trials(result.session_id)) {
    const auto metrics = metrics_from_json(t.metrics_json);
    if (config_from_json(t.config_json).compression != Compression::kFp16) continue;
    judged = true;
    ASSERT_TRUE(metrics.inflation) << t.metrics_json;
    EXPECT_EQ(metrics.inflation->kind, InflationKind::kMeasured);
    EXPECT_NEAR(metrics.inflation->estimate, 2.4, 0.2);
    EXPECT_EQ(t.status, TrialStatus::kOk) << t.error;  // the guard passes it: its loss ends where the uncompressed one does
    EXPECT_EQ(metrics.trajectory.size(), static_cast<size_t>(options_.trajectory_steps));
    EXPECT_NE(metrics.guard["data"].get<std::string>().find("synthetic"), std::string::npos) << t.metrics_json;
  }
  EXPECT_TRUE(judged);
  const auto decisions = store_->decisions();
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_TRUE(decisions.front().config.is_default()) << decisions.front().note;
  EXPECT_NE(decisions.front().note.find("the fastest step, allreduce, fp16 (100.0 ms), was ranked lower"), std::string::npos) << decisions.front().note;
  EXPECT_NE(decisions.front().note.find("its step inflation is 2."), std::string::npos) << decisions.front().note;
}

TEST_F(SessionTest, ALossCheckFailedWithinItsNoiseGetsLongerTrajectoriesAndIsChosenWhenTheyPassIt) {
  // PowerSGD (3x, faithful) lags the uncompressed loss by a gap that closes (fake_worker.py's
  // FAKE_WORKER_LAG; guard_test.cc has the figures): its loss check fails on 60 steps within noise,
  // the guard runs both trajectories to 120 steps, passes it on them, and the session chooses it.
  setenv("FAKE_WORKER_MODE", "compressors", 1);
  setenv("FAKE_WORKER_PSGD", "faithful", 1);
  setenv("FAKE_WORKER_LAG", "powersgd:0.8:30", 1);
  options_.space.bucket_mb = {25};
  options_.space.streams = {1};
  options_.space.compression = {Compression::kNone, Compression::kPowerSgd};
  options_.space.powersgd_ranks = {4};
  options_.compression_searched = true;
  Recorder recorder;
  const SessionResult result = run_session(options_, *store_, recorder);
  unsetenv("FAKE_WORKER_PSGD");
  unsetenv("FAKE_WORKER_LAG");
  ASSERT_EQ(result.status, SessionResult::Status::kDone) << result.error;
  const auto stored = store_->trials(result.session_id);
  ASSERT_GE(stored.size(), 4u);
  // the reference; PowerSGD, undecided on 60 steps; the reference again on 120; PowerSGD on 120
  const auto metrics = [&stored](size_t i) { return metrics_from_json(stored[i].metrics_json); };
  EXPECT_EQ(metrics(0).trajectory.size(), 60u);
  EXPECT_EQ(stored[1].status, TrialStatus::kOk) << stored[1].error;
  EXPECT_EQ(metrics(1).guard["passed"], false);
  EXPECT_NE(metrics(1).guard.value("undecided", "").find("its loss check failed within noise"), std::string::npos)
      << stored[1].metrics_json;
  EXPECT_EQ(stored[2].role, TrialRole::kBaseline);
  EXPECT_EQ(config_from_json(stored[2].config_json).compression, Compression::kNone);
  EXPECT_EQ(metrics(2).trajectory.size(), 120u);
  EXPECT_EQ(stored[3].role, TrialRole::kSearch);
  EXPECT_EQ(config_from_json(stored[3].config_json).compression, Compression::kPowerSgd);
  EXPECT_EQ(stored[3].status, TrialStatus::kOk) << stored[3].error;
  EXPECT_EQ(metrics(3).trajectory.size(), 120u);
  EXPECT_EQ(metrics(3).guard["passed"], true) << stored[3].metrics_json;
  EXPECT_EQ(metrics(3).guard["extended"]["from_steps"], 60);
  EXPECT_EQ(metrics(3).guard["extended"]["to_steps"], 120);
  bool said = false;
  for (const auto& n : recorder.notes) {
    said |= n.find("cannot decide on 60 steps (its loss check failed within noise") != std::string::npos &&
            n.find("its trajectories are extended to 120 steps") != std::string::npos;
  }
  EXPECT_TRUE(said);
  const auto decisions = store_->decisions();
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_EQ(decisions.front().config.compression, Compression::kPowerSgd) << decisions.front().note;
}

TEST_F(SessionTest, NoFasterConfigKeepsDdpDefaultsWithoutPairs) {
  Recorder recorder;
  const SessionResult result = run_session(options_, *store_, recorder);
  ASSERT_EQ(result.status, SessionResult::Status::kDone) << result.error;
  EXPECT_EQ(recorder.trials.size(), 2u);  // equal costs: the first measured, DDP's defaults, stands
  const auto decisions = store_->decisions();
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_TRUE(decisions.front().config.is_default());
  EXPECT_NE(decisions.front().note.find("keep DDP defaults"), std::string::npos) << decisions.front().note;
}

TEST_F(SessionTest, GradAsBucketViewIsMeasuredOnlyWhenItsKnobIsSearched) {
  Recorder off;
  ASSERT_EQ(run_session(options_, *store_, off).status, SessionResult::Status::kDone);
  options_.space.grad_as_bucket_view = {false, true};
  Recorder on;
  const SessionResult result = run_session(options_, *store_, on);
  ASSERT_EQ(result.status, SessionResult::Status::kDone) << result.error;
  // Off (the default): streams 1, 2 as before. On: each of them with and without the bucket view.
  ASSERT_EQ(off.results.size(), 2u);
  ASSERT_EQ(on.results.size(), 4u);
  size_t views = 0;
  for (const auto& r : off.results) EXPECT_FALSE(r.config.gradient_as_bucket_view);
  for (const auto& r : on.results) views += r.config.gradient_as_bucket_view == std::optional<bool>(true);
  EXPECT_EQ(views, 2u);
  const auto stored = nlohmann::json::parse(store_->session(result.session_id)->search_space_json);
  EXPECT_EQ(stored["gradient_as_bucket_view"], nlohmann::json::array({false, true}));
  EXPECT_EQ(stored["size"], 4);
}

TEST_F(SessionTest, EachNcclSocketsValueRunsInWorkersLaunchedWithIt) {
  // NCCL reads its socket variables once per process: a value is an environment of its own, so the
  // session relaunches the workers when it changes, and trials of one value share the workers.
  const std::string env_log = dir_ + "/launches.txt";
  setenv("FAKE_WORKER_ENV_LOG", env_log.c_str(), 1);
  options_.gpus = 1;  // a GPU session: every launch says which sockets it runs
  options_.space.streams = {1, 2};
  options_.space.nccl_sockets = {std::nullopt, NcclSockets{2, 4}};
  Recorder recorder;
  const SessionResult result = run_session(options_, *store_, recorder);
  unsetenv("FAKE_WORKER_ENV_LOG");
  ASSERT_EQ(result.status, SessionResult::Status::kDone) << result.error;
  ASSERT_EQ(recorder.results.size(), 4u);
  size_t with_sockets = 0;
  for (const auto& r : recorder.results) with_sockets += r.config.nccl_sockets == NcclSockets{2, 4};
  EXPECT_EQ(with_sockets, 2u);
  // The grid runs streams 1 then 2, each with NCCL's choice then 2x4 (the last knob varies fastest):
  // a launch for each change of value, the trials between them in one launch.
  std::ifstream in(env_log);
  std::vector<std::string> launches;
  for (std::string line; std::getline(in, line);) launches.push_back(line);
  std::vector<std::string> expected = {"0 - -", "2x4 2 4", "0 - -", "2x4 2 4"};
  ASSERT_GE(launches.size(), expected.size());
  EXPECT_EQ(std::vector<std::string>(launches.begin(), launches.begin() + 4), expected);
  // Nothing faster than DDP's defaults: no pairs, so no launch after the search's last.
  EXPECT_EQ(launches.size(), expected.size());
  // The stored trial holds the value it ran with.
  size_t stored = 0;
  for (const auto& t : store_->trials(result.session_id)) {
    stored += config_from_json(t.config_json).nccl_sockets == NcclSockets{2, 4};
  }
  EXPECT_EQ(stored, 2u);
}

TEST_F(SessionTest, NcclsInfoLineSaysWhichNetItChoseAndWinsOverThePlansView) {
  // The workers' NCCL writes its INFO lines to the work folder (NCCL_DEBUG=INFO, INIT,NET); the
  // session reads "Using network NAME" after the first trial. 2x4 sockets step twice as fast here.
  options_.gpus = 1;
  options_.space.streams = {1};
  options_.space.nccl_sockets = {std::nullopt, NcclSockets{2, 4}};
  options_.nccl_net = {true, "no /sys/class/infiniband device, no NCCL_NET_PLUGIN or NCCL_NET"};
  setenv("FAKE_WORKER_MODE", "fast_sockets", 1);
  auto run = [&](const char* net, Recorder& recorder) {
    setenv("FAKE_WORKER_NCCL_NET", net, 1);
    const SessionResult result = run_session(options_, *store_, recorder);
    unsetenv("FAKE_WORKER_NCCL_NET");
    EXPECT_EQ(result.status, SessionResult::Status::kDone) << result.error;
    return nlohmann::json::parse(store_->decisions().back().evidence_json);
  };
  Recorder socket;  // as the plan saw it: the faster sockets value is confirmed and kept
  auto evidence = run("Socket", socket);
  EXPECT_NE(std::find(socket.notes.begin(), socket.notes.end(),
                      "NCCL's net: NCCL's INFO line: Using network Socket, as the plan saw it (no "
                      "/sys/class/infiniband device, no NCCL_NET_PLUGIN or NCCL_NET)"),
            socket.notes.end());
  EXPECT_EQ(to_string(store_->decisions().back().config.nccl_sockets), "2x4");
  EXPECT_EQ(evidence["nccl_net"],
            (nlohmann::json{{"socket", true}, {"why", "NCCL's INFO line: Using network Socket"}, {"from", "line"}}));

  Recorder ib;  // NCCL used IB after all: the line wins, and no decision keeps a sockets value
  evidence = run("IB", ib);
  unsetenv("FAKE_WORKER_MODE");
  const std::string said = fmt::format("{}", fmt::join(ib.notes, "\n"));
  EXPECT_NE(said.find("NCCL's net: NCCL's INFO line: Using network IB, not Socket as the plan saw it (no "
                      "/sys/class/infiniband device, no NCCL_NET_PLUGIN or NCCL_NET): the line wins (it is what NCCL "
                      "did); NCCL's sockets change nothing on that net, so no decision keeps a sockets value"),
            std::string::npos) << said;
  EXPECT_NE(said.find("NCCL sockets 2x4 dropped from the candidate: NCCL's net is not Socket (NCCL's INFO line: "
                      "Using network IB)"),
            std::string::npos) << said;
  const Decision& d = store_->decisions().back();
  EXPECT_FALSE(d.config.nccl_sockets.has_value());
  EXPECT_TRUE(d.config.is_default());  // without its sockets the candidate is DDP's defaults: no pairs
  EXPECT_EQ(evidence["nccl_net"]["from"], "line");
  EXPECT_FALSE(evidence.contains("pairs"));
}

TEST_F(SessionTest, UnbuildableModelIsAUsageFailureAndStoresNoSession) {
  setenv("FAKE_WORKER_MODE", "fatal_usage", 1);
  Recorder recorder;
  const SessionResult result = run_session(options_, *store_, recorder);
  EXPECT_EQ(result.status, SessionResult::Status::kFailed);
  EXPECT_TRUE(result.usage_error);
  EXPECT_NE(result.error.find("'nope'"), std::string::npos) << result.error;
  EXPECT_EQ(result.session_id, 0);
  EXPECT_TRUE(store_->sessions().empty());
}

TEST_F(SessionTest, ResumeReusesStoredTrialsButMeasuresAgainOneThatDoesNotSayItWasFinite) {
  setenv("FAKE_WORKER_MODE", "fast_streams", 1);
  const int64_t id = stored_session();
  CommConfig two_streams;
  two_streams.streams = 2;
  TrialRecord unknown;  // DDP defaults, stored without "finite" (an older or foreign writer)
  unknown.session_id = id;
  unknown.ordinal = 0;
  unknown.config_json = config_to_json(CommConfig{});
  unknown.step_times_s = {0.1, 0.2, 0.3};
  unknown.metrics_json = R"({"p50_s": 0.2, "loss": 1.5})";
  store_->add_trial(unknown);
  TrialRecord known = unknown;
  known.ordinal = 1;
  known.config_json = config_to_json(two_streams);
  known.step_times_s = {0.05, 0.1, 0.15};
  known.metrics_json = R"({"p50_s": 0.1, "loss": 1.5, "finite": true})";
  store_->add_trial(known);
  options_.resume = id;
  Recorder recorder;
  const SessionResult result = run_session(options_, *store_, recorder);
  ASSERT_EQ(result.status, SessionResult::Status::kDone) << result.error;
  bool said = false;
  for (const auto& note : recorder.notes) said = said || note.find("measured again") != std::string::npos;
  EXPECT_TRUE(said);
  ASSERT_FALSE(recorder.trials.empty());
  EXPECT_EQ(recorder.trials.front().role, TrialRole::kSearch);
  EXPECT_EQ(recorder.trials.front().label, "DDP defaults");  // measured again; two streams reused
  EXPECT_EQ(recorder.trials.front().ordinal, 2);
  EXPECT_EQ(recorder.trials.size(), 1u + 2u * static_cast<size_t>(options_.repeats));
}

TEST_F(SessionTest, ResumeReusesFinishedDecisionPairsAndRunsOnlyTheRest) {
  setenv("FAKE_WORKER_MODE", "fast_streams", 1);
  options_.repeats = 3;
  const int64_t id = stored_session();
  CommConfig two_streams;
  two_streams.streams = 2;
  int64_t ordinal = 0;
  auto add = [&](TrialRole role, const CommConfig& config, double step, const std::string& pair) {
    TrialRecord t;
    t.session_id = id;
    t.ordinal = ordinal++;
    t.role = role;
    t.config_json = config_to_json(config);
    t.step_times_s = {step, step, step};
    t.metrics_json = R"({"p50_s": )" + std::to_string(step) + R"(, "loss": 1.5, "loss_first": 2.0, "finite": true)" +
                     pair + "}";
    store_->add_trial(t);
  };
  add(TrialRole::kSearch, CommConfig{}, 0.2, "");
  add(TrialRole::kSearch, two_streams, 0.1, "");
  add(TrialRole::kCandidate, two_streams, 0.1, R"(, "pair": 0)");  // pair 1: both runs stored
  add(TrialRole::kBaseline, CommConfig{}, 0.2, R"(, "pair": 0)");
  add(TrialRole::kBaseline, CommConfig{}, 0.2, R"(, "pair": 1)");  // pair 2: killed before its candidate ran
  options_.resume = id;
  Recorder recorder;
  const SessionResult result = run_session(options_, *store_, recorder);
  ASSERT_EQ(result.status, SessionResult::Status::kDone) << result.error;
  // Pair 1 is reused; pair 2 (half done) and pair 3 run: four trials, no search trial.
  ASSERT_EQ(recorder.trials.size(), 4u);
  EXPECT_EQ(recorder.trials[0].label.rfind("pair 2 ", 0), 0u) << recorder.trials[0].label;
  EXPECT_EQ(recorder.trials[0].ordinal, 5);
  bool said = false;
  for (const auto& note : recorder.notes) said = said || note.find("1 pair(s) stored before") != std::string::npos;
  EXPECT_TRUE(said);
  const auto decisions = store_->decisions();
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(decisions[0].evidence_json)["pairs"].size(), 3u);
  EXPECT_EQ(decisions[0].config, two_streams);

  // Killed after the decision was stored, before the session was closed: resuming keeps that decision.
  store_->finish_session(id, SessionStatus::kRunning);
  Recorder again;
  ASSERT_EQ(run_session(options_, *store_, again).status, SessionResult::Status::kDone);
  EXPECT_TRUE(again.trials.empty());
  EXPECT_EQ(store_->decisions().size(), 1u);
}

TEST_F(SessionTest, ANodeThatLeftEndsTheSessionWithTheReasonStoredInItsTrial) {
  // The test plays node 1's acspeed-tune on the node link and leaves while trial 1 is in flight.
  {
    NodeLinks probe(0, 2);
    options_.nnodes = 2;
    options_.master_port = probe.port() - 1;
  }
  const std::string gate = dir_ + "/gate";
  setenv("FAKE_WORKER_GATE", ("1:" + gate).c_str(), 1);
  std::thread node1([&] {
    NodeLink link("127.0.0.1", options_.master_port + 1, 1, std::chrono::seconds(60));
    for (int i = 0; i < 3000 && !std::filesystem::exists(gate + ".reached"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  Recorder recorder;
  const SessionResult result = run_session(options_, *store_, recorder);
  node1.join();
  unsetenv("FAKE_WORKER_GATE");
  EXPECT_EQ(result.status, SessionResult::Status::kFailed);
  EXPECT_FALSE(result.usage_error);
  EXPECT_EQ(result.error.rfind("node 1 (127.0.0.1) left the session: ", 0), 0u) << result.error;
  EXPECT_NE(result.error.find("; the session ends here"), std::string::npos) << result.error;
  const auto stored = store_->trials(result.session_id);
  ASSERT_EQ(stored.size(), 2u);  // no trial after it
  EXPECT_EQ(stored[0].status, TrialStatus::kOk);
  EXPECT_EQ(stored[1].status, TrialStatus::kFailed);
  EXPECT_EQ(stored[1].error.rfind("node 1 (127.0.0.1) left the session: ", 0), 0u) << stored[1].error;
  EXPECT_EQ(store_->session(result.session_id)->status, SessionStatus::kFailed);
  EXPECT_FALSE(result.kept_logs.empty());
  std::filesystem::remove_all(result.kept_logs);
}

TEST(SessionPlan, NamesTheStrategyTheTrialsAndTheWorkersArgv) {
  TuneOptions o = tune_options_for(false);
  o.model = "resnet18";
  o.python = "/usr/bin/python3";
  o.strategy = "grid";
  const auto lines = plan_lines(o, "box");
  ASSERT_GE(lines.size(), 4u);
  EXPECT_NE(lines[0].find("plan: tune resnet18 (fp32 precision) on box"), std::string::npos) << lines[0];
  bool strategy = false, workers = false;
  for (const auto& line : lines) {
    strategy = strategy || line.find("strategy: grid") != std::string::npos;
    workers = workers || line.find("--master_port=<a free port>") != std::string::npos;
  }
  EXPECT_TRUE(strategy && workers);
  for (const auto& line : lines) EXPECT_EQ(line.find("share"), std::string::npos) << line;
  o.share_gpus = o.gpus_shared = true;
  o.nproc_per_node = 2;
  o.gpus = 1;
  const auto shared = plan_lines(o, "1xNVIDIA-H200-pcie");
  EXPECT_NE(std::find(shared.begin(), shared.end(),
                      "  GPUs: 2 ranks per node share 1 GPU (--share-gpus): device = local rank mod 1, an NCCL host "
                      "identity per rank; the decision applies only to jobs that share GPUs"),
            shared.end());
}

TEST_F(SessionTest, TwoNodesCalibrateTheStepModelAndEveryTrialCarriesItsBound) {
  // The fake workers time their steps by the model's physics (fake_worker.py, mode link).
  setenv("FAKE_WORKER_MODE", "link", 1);
  options_.space.bucket_mb = {5, 25};
  options_.space.compression = {Compression::kNone, Compression::kFp16};
  options_.compression_searched = true;
  options_.strategy = "auto";  // the model strategy
  Recorder recorder;
  const SessionResult result = run_session(options_, *store_, recorder);
  ASSERT_EQ(result.status, SessionResult::Status::kDone) << result.error;
  ASSERT_GE(recorder.trials.size(), 3u);
  EXPECT_EQ(recorder.trials[0].role, TrialRole::kCompute);
  EXPECT_EQ(recorder.trials[1].role, TrialRole::kCalibration);
  const auto stored = store_->trials(result.session_id);
  EXPECT_EQ(stored[0].role, TrialRole::kCompute);
  EXPECT_EQ(stored[1].role, TrialRole::kCalibration);
  for (size_t i = 1; i < recorder.trials.size(); ++i) {
    const auto& t = recorder.trials[i];
    ASSERT_TRUE(t.bound_s) << "trial " << i << " " << t.label;
    EXPECT_GT(*t.bound_s, 0);
    EXPECT_LE(*t.bound_s, t.metrics.p50_s + 1e-9) << t.label;
  }
  // DDP's defaults, with only the calibration trial's sample (latency and bandwidth not yet apart):
  // bound about forward + optimizer + 46.8 MB at 125 MB/s; its own step predicted exactly.
  const auto& defaults = recorder.trials[2];
  EXPECT_EQ(defaults.label, "DDP defaults");
  EXPECT_NEAR(*defaults.bound_s, 0.04 + 46.8e6 / 125e6, 0.02 * defaults.metrics.p50_s);
  EXPECT_NEAR(*defaults.predicted_s, defaults.metrics.p50_s, 1e-9);
  // fp16 on 2 streams is the fastest. Its flow count's link comes from the one uncast trial of 2
  // flows (bucket 5 MiB, 2 streams: 5 collectives and 46.8 MB in 0.3844 s), not from the fp16 trials
  // (step_model.h): latency and bandwidth not apart, so its bound is forward + optimizer + 23.4 MB at
  // that trial's rate, above the physics' 23.4 MB at 125 MB/s by the latency folded in, never under it.
  ASSERT_FALSE(recorder.results.empty());
  const SearchResult& fastest = recorder.results.front();
  EXPECT_EQ(fastest.config.compression, Compression::kFp16);
  EXPECT_EQ(fastest.config.streams, 2);
  ASSERT_TRUE(fastest.bound_s);
  EXPECT_NEAR(*fastest.bound_s, 0.04 + 23.4e6 * (5 * 0.002 + 46.8e6 / 125e6) / 46.8e6, 1e-6);
  EXPECT_GT(*fastest.bound_s, 0.04 + 23.4e6 / 125e6);
  // The slower uncompressed configs are predicted so and skipped: fewer trials than the grid's 8.
  EXPECT_LT(recorder.results.size(), 8u);
  bool summarised = false, decided = false;
  for (const auto& n : recorder.notes) {
    summarised |= n.rfind("model strategy:", 0) == 0;
    decided |= n.find("against a bound of") != std::string::npos;
  }
  EXPECT_TRUE(summarised);
  EXPECT_TRUE(decided);
  const auto decisions = store_->decisions();
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_NE(decisions.front().evidence_json.find("\"efficiency\""), std::string::npos);
}

TEST_F(SessionTest, WhenCommunicationDominatesTheNoteCountsWhatCompressionWouldSaveFromTheGradientsShapes) {
  // Mode link: two streams run acspeed's hook, so the probe says communication is 82% of the step; the
  // hello describes one 11700x1000 fp32 matrix (44.6 MiB).
  setenv("FAKE_WORKER_MODE", "link", 1);
  options_.space.streams = {2};
  Recorder recorder;
  const SessionResult result = run_session(options_, *store_, recorder);
  ASSERT_EQ(result.status, SessionResult::Status::kDone) << result.error;
  const auto note = std::find_if(recorder.notes.begin(), recorder.notes.end(), [](const std::string& n) {
    return n.find("compression was not searched") != std::string::npos;
  });
  ASSERT_NE(note, recorder.notes.end());
  // fp16 halves it; PowerSGD sends (11700 + 1000) x r floats: 50800 and 812800 bytes at ranks 1 and 16.
  EXPECT_NE(note->find("fp16 (22.3 MiB instead of 44.6 MiB: saves 22.3 MiB)"), std::string::npos) << *note;
  EXPECT_NE(note->find("powersgd ranks 1,16 (0.05 / 0.78 MiB: saves 44.6 / 43.9 MiB)"), std::string::npos) << *note;
}


TEST_F(SessionTest, EveryNumericsFamilyIsMeasuredOnceBeforeAnyGetsASecondCastsFirstThenHighRanks) {
  setenv("FAKE_WORKER_MODE", "compressors", 1);
  options_.space.bucket_mb = {5, 25};
  options_.space.streams = {1};
  options_.space.compression = {Compression::kNone, Compression::kPowerSgd, Compression::kFp16};
  options_.space.powersgd_ranks = {1, 4, 16};
  options_.compression_searched = true;
  Recorder recorder;
  const SessionResult result = run_session(options_, *store_, recorder);
  ASSERT_EQ(result.status, SessionResult::Status::kDone) << result.error;
  std::vector<std::string> order;
  for (const auto& t : store_->trials(result.session_id)) {
    if (t.role != TrialRole::kSearch) continue;
    const auto c = config_from_json(t.config_json);
    order.push_back(c.compression == Compression::kPowerSgd ? fmt::format("powersgd {}", c.powersgd_rank)
                                                            : std::string(to_string(c.compression)));
  }
  // The uncompressed reference (the search's start), then fp16, then PowerSGD from the highest rank
  // down, each at the search's start (bucket 25): one trial per family before the grid's.
  ASSERT_GE(order.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(order.begin(), order.begin() + 5),
            (std::vector<std::string>{"none", "fp16", "powersgd 16", "powersgd 4", "powersgd 1"}));
}

TEST(DefaultSeed, TheSameJobGetsTheSameSeedAnotherJobAnother) {
  TuneOptions job;
  job.model = "resnet18";
  job.batch_size = 16;
  job.image_size = 32;
  job.nnodes = 2;
  job.nproc_per_node = 1;
  job.trajectory_steps = 120;
  TuneOptions again = job;
  again.budget_minutes = 10;   // not part of the job
  again.space.streams = {1};   // nor the search space
  EXPECT_EQ(default_seed(job), default_seed(again));
  EXPECT_LT(default_seed(job), uint64_t{1} << 31);
  // Every part of the job changes it.
  const std::vector<std::function<void(TuneOptions&)>> changes = {
      [](TuneOptions& o) { o.model = "resnet50"; },       [](TuneOptions& o) { o.data = "pkg.data:batches"; },
      [](TuneOptions& o) { o.precision = Precision::kAmp; }, [](TuneOptions& o) { o.batch_size = 32; },
      [](TuneOptions& o) { o.image_size = 64; },          [](TuneOptions& o) { o.nnodes = 1; },
      [](TuneOptions& o) { o.nproc_per_node = 2; },       [](TuneOptions& o) { o.trajectory_steps = 60; }};
  for (size_t i = 0; i < changes.size(); ++i) {
    TuneOptions other = job;
    changes[i](other);
    EXPECT_NE(default_seed(other), default_seed(job)) << "change " << i;
  }
}

TEST_F(SessionTest, EveryNumericsFamilyIsMeasuredEvenWhenTheBudgetIsSpentBeforeItsTurn) {
  // Trial 1 (fp16, the first family) is held past the whole budget: PowerSGD's ranks still get their
  // one measured trial each; then the budget ends the search before any strategy point.
  setenv("FAKE_WORKER_MODE", "compressors", 1);
  setenv("FAKE_WORKER_PSGD", "faithful", 1);
  options_.space.compression = {Compression::kNone, Compression::kFp16, Compression::kPowerSgd};
  options_.space.powersgd_ranks = {1, 4};
  options_.space.streams = {1, 2};
  options_.compression_searched = true;
  Recorder recorder;
  const SessionResult result = run_with_the_budget_spent_by_trial_1(recorder);
  unsetenv("FAKE_WORKER_PSGD");
  ASSERT_EQ(result.status, SessionResult::Status::kDone) << result.error;
  std::vector<std::string> searched;
  for (const auto& t : store_->trials(result.session_id)) {
    if (t.role != TrialRole::kSearch) continue;
    const auto c = config_from_json(t.config_json);
    searched.push_back(fmt::format("{} {}", c.describe(), t.status == TrialStatus::kOk ? "ok" : t.error));
  }
  ASSERT_EQ(searched.size(), 4u) << fmt::format("{}", fmt::join(searched, "; "));
  EXPECT_NE(searched[1].find("fp16"), std::string::npos) << searched[1];
  EXPECT_NE(searched[2].find("powersgd rank 4"), std::string::npos) << searched[2];
  EXPECT_NE(searched[3].find("powersgd rank 1"), std::string::npos) << searched[3];
  for (const auto& s : searched) EXPECT_EQ(s.substr(s.size() - 2), "ok") << s;
  bool stopped = false;
  for (const auto& n : recorder.notes) stopped |= n.find("search stopped after 4 trial(s)") != std::string::npos;
  EXPECT_TRUE(stopped);  // the strategy's first point (2 streams) found the budget spent
}

TEST_F(SessionTest, TheGuardsEvidenceIsTimedAgainstABudgetOfItsOwnNotTheSearchs) {
  // Each trajectory takes 3.5 s (fake_worker.py's FAKE_WORKER_GUARD_S): the reference's and PowerSGD's
  // (the numerics' first points, run whatever the budgets say) take 7 s, past the guard's 6 s, so it
  // declines to extend PowerSGD's undecided loss check, while the search, 6 s of its own, goes on to
  // the uncompressed 2-stream config, which has nothing for the guard to measure. One budget for both
  // stopped the search there.
  setenv("FAKE_WORKER_MODE", "compressors", 1);
  setenv("FAKE_WORKER_PSGD", "faithful", 1);
  setenv("FAKE_WORKER_LAG", "powersgd:0.2:inf", 1);  // within noise on 60 steps
  setenv("FAKE_WORKER_GUARD_S", "3.5", 1);
  options_.space.streams = {1, 2};
  options_.space.compression = {Compression::kNone, Compression::kPowerSgd};
  options_.space.powersgd_ranks = {4};
  options_.compression_searched = true;
  options_.budget_minutes = 0.1;
  Recorder recorder;
  const SessionResult result = run_session(options_, *store_, recorder);
  unsetenv("FAKE_WORKER_PSGD");
  unsetenv("FAKE_WORKER_LAG");
  unsetenv("FAKE_WORKER_GUARD_S");
  ASSERT_EQ(result.status, SessionResult::Status::kDone) << result.error;
  bool declined = false, stopped = false;
  for (const auto& n : recorder.notes) {
    declined |= n.find("are not extended: the convergence guard's time budget of 0.1 min") != std::string::npos;
    stopped |= n.find("search stopped") != std::string::npos;
  }
  EXPECT_TRUE(declined) << fmt::format("{}", fmt::join(recorder.notes, "\n"));
  EXPECT_FALSE(stopped) << fmt::format("{}", fmt::join(recorder.notes, "\n"));
  bool two_streams = false;
  for (const auto& t : store_->trials(result.session_id)) {
    const CommConfig c = config_from_json(t.config_json);
    two_streams |= t.role == TrialRole::kSearch && t.status == TrialStatus::kOk && c.streams == 2 &&
                   c.compression == Compression::kNone;
  }
  EXPECT_TRUE(two_streams);
}

TEST_F(SessionTest, ACandidateWhosePairsStraddleItsBarGetsMorePairsNotARejection) {
  // fp16 steps twice as fast, but one run of its pairs is slow (FAKE_WORKER_SLOW): pair speedups 2,
  // 0.8, 2 put the interval's lower end below 1 with an estimate of 1.47; three more pairs (2 each)
  // decide it, and fp16 is stored on its six.
  setenv("FAKE_WORKER_MODE", "compressors", 1);
  setenv("FAKE_WORKER_SLOW", "5:2.5", 1);  // trial 5: pair 2's candidate
  options_.space.streams = {1};
  options_.space.compression = {Compression::kNone, Compression::kFp16};
  options_.compression_searched = true;
  Recorder recorder;
  const SessionResult result = run_session(options_, *store_, recorder);
  unsetenv("FAKE_WORKER_SLOW");
  ASSERT_EQ(result.status, SessionResult::Status::kDone) << result.error;
  const auto decisions = store_->decisions();
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_EQ(decisions.front().config.compression, Compression::kFp16) << decisions.front().note;
  EXPECT_NE(decisions.front().note.find("over 6 pairs"), std::string::npos) << decisions.front().note;
  const auto evidence = nlohmann::json::parse(decisions.front().evidence_json);
  EXPECT_EQ(evidence["pairs"].size(), 6u);
  bool said = false;
  for (const auto& n : recorder.notes) {
    said |= n.find("fp16 undecided on 3 pairs") != std::string::npos && n.find("3 more alternated pairs") != std::string::npos;
  }
  EXPECT_TRUE(said) << fmt::format("{}", fmt::join(recorder.notes, "\n"));
}

TEST_F(SessionTest, ACompressedCandidateKeptOutByTheSearchsBarHasThatBarMeasuredInPairs) {
  // DDP defaults' search trial (0) is slow: the exact 2-stream config looks 2.5x faster in the
  // search, a bar fp16 (2x) cannot clear. In pairs that config is 1x, so fp16 is stored.
  Recorder recorder;
  const Decision d = decide_compressed("0:2.5", nullptr, recorder);
  EXPECT_EQ(d.config.compression, Compression::kFp16) << d.note;
  EXPECT_NE(d.note.find("the bar for a compressed config: the step speedup of allreduce, 2 streams over its own 3 pairs, 1.000x"), std::string::npos) << d.note;
  EXPECT_NE(d.note.find("(2.500 in the search)"), std::string::npos) << d.note;
  const auto evidence = nlohmann::json::parse(d.evidence_json);
  EXPECT_EQ(evidence["bar_in_pairs"]["pairs"].size(), 3u);
  EXPECT_DOUBLE_EQ(evidence["speedups"]["bar"].get<double>(), 1.0);
  bool said = false;
  for (const auto& n : recorder.notes) said |= n.find("is measured in pairs too") != std::string::npos;
  EXPECT_TRUE(said) << fmt::format("{}", fmt::join(recorder.notes, "\n"));
}

TEST_F(SessionTest, TheFallbackToTheExactConfigReusesThePairsThatMeasuredTheBar) {
  // As above, but fp16 is 1.5x and the exact 2-stream config's pairs give 2x (their baseline runs,
  // trials 11, 12 and 15, slow): fp16 is out at that bar too, and the exact config is stored on the
  // pairs it already has, none run again.
  Recorder recorder;
  size_t trials = 0;
  const Decision d = decide_compressed("0:2.5,11:2,12:2,15:2", "fp16:1.5", recorder, &trials);
  EXPECT_EQ(d.config.compression, Compression::kNone) << d.note;
  EXPECT_EQ(d.config.streams, 2) << d.note;
  EXPECT_NE(d.note.find("over 3 pairs"), std::string::npos) << d.note;
  EXPECT_EQ(trials, 16u);  // 4 search trials, fp16's 3 pairs, the exact config's 3
  const auto evidence = nlohmann::json::parse(d.evidence_json);
  EXPECT_EQ(evidence["pairs"], evidence["bar_in_pairs"]["pairs"]);
  EXPECT_DOUBLE_EQ(evidence["compressed_candidate"]["speedups"]["bar"].get<double>(), 2.0);
}

TEST_F(SessionTest, ASearchTrialSkippedOnAKnownVerdictCostsNothingAndDoesNotEndTheSearch) {
  // powersgd (harmful here) is listed first, so the grid reaches its second config (2 streams, not
  // run: the verdict is known) before the uncompressed one; trial 1 is held until the budget is spent.
  setenv("FAKE_WORKER_MODE", "compressors", 1);
  options_.space.compression = {Compression::kPowerSgd, Compression::kNone};
  options_.space.powersgd_ranks = {4};
  options_.compression_searched = true;
  Recorder recorder;
  const SessionResult result = run_with_the_budget_spent_by_trial_1(recorder);
  ASSERT_EQ(result.status, SessionResult::Status::kDone) << result.error;
  const auto stored = store_->trials(result.session_id);
  ASSERT_EQ(stored.size(), 3u);  // the reference, powersgd 1 stream (rejected), powersgd 2 streams (not run)
  EXPECT_NE(stored[2].error.find("not run"), std::string::npos) << stored[2].error;
  EXPECT_EQ(config_from_json(stored[2].config_json).streams, 2);
  bool stopped = false;
  for (const auto& n : recorder.notes) stopped |= n.find("search stopped after 3 trial(s)") != std::string::npos;
  EXPECT_TRUE(stopped);  // by the uncompressed 2-stream config, the first that had to run
}

TEST_F(SessionTest, WhenTheBestCompressedCandidateFailsItsPairsTheBestCertifiedOneIsTriedNotDdpDefaults) {
  // powersgd (3x, faithful here) ranks first; its first decision pair crashes; fp16 (2x, certified)
  // goes to the pairs next and is chosen, where DDP's defaults stood before.
  setenv("FAKE_WORKER_MODE", "compressors", 1);
  setenv("FAKE_WORKER_PSGD", "faithful", 1);
  setenv("FAKE_WORKER_CRASH", "3", 1);  // trials 0-2: the reference, fp16, powersgd; 3: the first pair's candidate
  options_.space.streams = {1};
  options_.space.compression = {Compression::kNone, Compression::kFp16, Compression::kPowerSgd};
  options_.space.powersgd_ranks = {4};
  options_.compression_searched = true;
  Recorder recorder;
  const SessionResult result = run_session(options_, *store_, recorder);
  unsetenv("FAKE_WORKER_PSGD");
  unsetenv("FAKE_WORKER_CRASH");
  ASSERT_EQ(result.status, SessionResult::Status::kDone) << result.error;
  std::filesystem::remove_all(result.kept_logs);
  const auto decisions = store_->decisions();
  ASSERT_EQ(decisions.size(), 1u);
  const Decision& d = decisions.front();
  EXPECT_EQ(d.config.compression, Compression::kFp16) << d.note;
  const auto evidence = nlohmann::json::parse(d.evidence_json);
  EXPECT_EQ(evidence["compressed_candidate"]["candidate"]["compression"], "powersgd") << d.evidence_json;
  EXPECT_EQ(evidence["guard"]["passed"], true);  // the fallback's own certified verdict
  EXPECT_NE(d.note.find("the compressed candidate"), std::string::npos) << d.note;
}

}  // namespace
}  // namespace acspeed::tuner
