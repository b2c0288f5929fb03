// The worker group against a fake rank 0 (tests/tuner/fake_worker.py, no torch): one launch serves
// many trials; a crashed or hung trial is failed / timed out with the workers' own error and the
// next trial gets fresh workers; a --model that cannot be built is a usage error. With two nodes,
// the test plays node 1's acspeed-tune on the node link: what it reports names the failed trial's
// rank, a timed-out trial asks it to end its workers and says where its ranks were, and when it
// leaves, the trial in flight fails at once and so does every start after it.
#include "trial_runner.h"

#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include <gtest/gtest.h>

#include "acspeed/error.h"
#include "../support/scoped_env.h"
#include "node_link.h"
#include "worker_launch.h"
#include "worker_module.h"

namespace acspeed::tuner {
namespace {

class TrialRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/acspeed-runner-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    launch_.python = ACSPEED_FAKE_WORKER;
    launch_.worker_args = {"--model", "fake"};
    launch_.work_dir = dir_;
    launch_.start_timeout = std::chrono::seconds(30);
  }
  void TearDown() override {
    unsetenv("FAKE_WORKER_MODE");
    unsetenv("FAKE_WORKER_ONCE");
    unsetenv("FAKE_WORKER_GATE");
    std::filesystem::remove_all(dir_);
  }
  TrialRequest request(int64_t id) {
    TrialRequest r;
    r.id = id;
    r.config.streams = 2;
    r.warmup = 1;
    r.steps = 3;
    return r;
  }
  void mode(const std::string& value) {
    setenv("FAKE_WORKER_MODE", value.c_str(), 1);
    setenv("FAKE_WORKER_ONCE", (dir_ + "/fault-done").c_str(), 1);
  }
  // Two nodes: node 0's link listens on the port after master_port, one that was free a moment ago.
  void two_nodes() {
    NodeLinks probe(0, 2);
    launch_.nnodes = 2;
    launch_.master_port = probe.port() - 1;
  }
  // The fake rank 0 stops before answering trial `id` (or crashing in it) until released.
  std::string gate(int64_t id) {
    const std::string path = dir_ + "/gate";
    setenv("FAKE_WORKER_GATE", (std::to_string(id) + ":" + path).c_str(), 1);
    return path;
  }
  static bool wait_for(const std::string& path) {
    for (int i = 0; i < 1500 && !std::filesystem::exists(path); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return std::filesystem::exists(path);
  }

  std::string dir_;
  WorkerLaunch launch_;
};

TEST_F(TrialRunnerTest, OneLaunchServesManyTrials) {
  WorkerGroup group(launch_);
  const auto& hello = group.start();
  EXPECT_EQ(hello.world_size, 2);
  EXPECT_EQ(hello.model_signature, "p1-0000000000000001");
  for (int64_t id = 0; id < 3; ++id) {
    const auto outcome = group.run(request(id), std::chrono::seconds(10));
    ASSERT_EQ(outcome.status, TrialStatus::kOk) << outcome.error;
    EXPECT_EQ(outcome.reply.id, id);
    EXPECT_EQ(outcome.reply.step_times_s, (std::vector<double>{0.1, 0.2, 0.3}));
    EXPECT_EQ(outcome.reply.measured.loss, 1.5);
  }
  EXPECT_EQ(group.launches(), 1);
}

TEST_F(TrialRunnerTest, CrashedTrialFailsWithTheWorkersErrorAndTheNextOneRelaunches) {
  mode("crash:1");
  WorkerGroup group(launch_);
  EXPECT_EQ(group.run(request(0), std::chrono::seconds(10)).status, TrialStatus::kOk);
  const auto crashed = group.run(request(1), std::chrono::seconds(10));
  EXPECT_EQ(crashed.status, TrialStatus::kFailed);
  EXPECT_NE(crashed.error.find("RuntimeError: boom"), std::string::npos) << crashed.error;
  const auto next = group.run(request(2), std::chrono::seconds(10));
  EXPECT_EQ(next.status, TrialStatus::kOk) << next.error;
  EXPECT_EQ(group.launches(), 2);
}

TEST_F(TrialRunnerTest, HungTrialTimesOutAndTheNextOneRelaunches) {
  mode("hang:0");
  WorkerGroup group(launch_);
  const auto hung = group.run(request(0), std::chrono::seconds(1));
  EXPECT_EQ(hung.status, TrialStatus::kTimeout);
  EXPECT_NE(hung.error.find("timeout"), std::string::npos) << hung.error;
  const auto next = group.run(request(1), std::chrono::seconds(10));
  EXPECT_EQ(next.status, TrialStatus::kOk) << next.error;
  EXPECT_EQ(group.launches(), 2);
}

// Processes whose command line mentions `text` (a read-only look at /proc).
int processes_mentioning(const std::string& text) {
  int found = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    const std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline.find(text) != std::string::npos) ++found;
  }
  return found;
}

TEST_F(TrialRunnerTest, WorkersThatNeverConnectFailTheStartAndAreKilled) {
  mode("never_connect");
  launch_.start_timeout = std::chrono::seconds(2);
  WorkerGroup group(launch_);
  try {
    group.start();
    FAIL() << "expected Error";
  } catch (const InvalidArgument& e) {
    FAIL() << "not a usage error: " << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 did not connect within 2 s"), std::string::npos) << e.what();
  }
  EXPECT_EQ(processes_mentioning(dir_ + "/control.sock"), 0);  // the silent worker was killed, not left behind
}

TEST_F(TrialRunnerTest, ModelThatCannotBeBuiltIsAUsageError) {
  mode("fatal_usage");
  WorkerGroup group(launch_);
  try {
    group.start();
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'nope'"), std::string::npos) << e.what();
  }
}

TEST_F(TrialRunnerTest, ARankOfAnotherNodeIsNamedFromWhatThatNodeReported) {
  two_nodes();
  mode("crash:0");  // rank 0 goes down too, as a rank that lost its peer does
  const std::string held = gate(0);
  WorkerGroup group(launch_);
  NodeLink node1("127.0.0.1", launch_.master_port + 1, 1, std::chrono::seconds(5));
  std::thread other_node([&] {
    if (!wait_for(held + ".reached")) return;
    RankEvidence died;
    died.rank = 1;
    died.exit_code = 3;
    died.log_path = "/tmp/n1/workers-1-rank1.log";
    died.log_tail = {"tiny_models: firing exit"};
    node1.report(1, 1, {died});
    std::ofstream{held};
  });
  const auto outcome = group.run(request(0), std::chrono::seconds(30));
  other_node.join();
  EXPECT_EQ(outcome.status, TrialStatus::kFailed);
  EXPECT_FALSE(outcome.node_lost);
  EXPECT_EQ(outcome.error, "rank 1 (node 1) ended with exit code 3 without reporting an error; last lines of its log: "
                           "tiny_models: firing exit (log: /tmp/n1/workers-1-rank1.log on node 1)");
  // Node 1 relaunches its workers; node 0 does too, and the session goes on.
  EXPECT_EQ(group.run(request(1), std::chrono::seconds(10)).status, TrialStatus::kOk);
}

TEST_F(TrialRunnerTest, ATimedOutTrialEndsTheOtherNodesWorkersAndSaysWhereEveryNodesRanksWere) {
  two_nodes();
  mode("hang:0");
  launch_.stack_dump_s = 1;
  // Rank 0's log with its stack dump, as the worker's faulthandler writes it (the fake writes none).
  std::ofstream(dir_ + "/workers-1-rank0.log") << "Timeout (0:00:01)!\nThread 0x1 (most recent call first):\n"
                                                  "  File \"/repo/python/" << worker_source_file()
                                               << "\", line 264 in run\n";
  WorkerGroup group(launch_);
  NodeLink node1("127.0.0.1", launch_.master_port + 1, 1, std::chrono::seconds(5));
  std::optional<EndWorkers> asked;
  std::thread other_node([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!asked && std::chrono::steady_clock::now() < deadline) {
      node1.closed(std::chrono::milliseconds(50));
      asked = node1.take_end_request();
    }
    if (!asked) return;
    // Its hung rank, killed on node 0's request: where its stack was, read from its log there.
    RankEvidence hung;
    hung.rank = 1;
    hung.launcher_exit_code = 137;
    hung.log_path = "/tmp/n1/workers-1-rank1.log";
    hung.stack = "_fire_next_fault (tiny_models.py:80)";
    node1.report(1, 137, {hung});
  });
  const auto outcome = group.run(request(0), std::chrono::seconds(2));
  other_node.join();
  ASSERT_TRUE(asked) << "node 1 was not asked to end its workers";
  EXPECT_EQ(asked->trial, 0);
  EXPECT_EQ(outcome.status, TrialStatus::kTimeout);
  EXPECT_EQ(outcome.error, "no result within the trial timeout of 2 s; where the ranks were after 1 s: "
                           "rank 0 (node 0) in run (worker.py:264); rank 1 (node 1) in _fire_next_fault "
                           "(tiny_models.py:80) (logs: " + dir_ + "/workers-1-rank*.log on node 0, "
                           "/tmp/n1/workers-1-rank*.log on node 1)");
  EXPECT_EQ(group.run(request(1), std::chrono::seconds(10)).status, TrialStatus::kOk);
}

TEST_F(TrialRunnerTest, ATrialWithOtherNcclSocketsRelaunchesTheWorkersOnEveryNodeWithThem) {
  two_nodes();
  launch_.pin_nccl_sockets = true;
  const std::string env_log = dir_ + "/launches.txt";
  setenv("FAKE_WORKER_ENV_LOG", env_log.c_str(), 1);
  WorkerGroup group(launch_);
  NodeLink node1("127.0.0.1", launch_.master_port + 1, 1, std::chrono::seconds(5));
  std::vector<EndWorkers> asked;
  std::atomic<bool> done{false};
  std::thread other_node([&] {  // `asked` is read after the join
    for (bool last = false; !last;) {
      last = done;
      node1.closed(std::chrono::milliseconds(50));
      if (auto request = node1.take_end_request()) asked.push_back(*request);
    }
  });
  EXPECT_EQ(group.run(request(0), std::chrono::seconds(10)).status, TrialStatus::kOk);
  TrialRequest two_by_four = request(1);
  two_by_four.config.nccl_sockets = NcclSockets{2, 4};
  EXPECT_EQ(group.run(two_by_four, std::chrono::seconds(10)).status, TrialStatus::kOk);
  two_by_four.id = 2;  // the same value again: the same workers
  EXPECT_EQ(group.run(two_by_four, std::chrono::seconds(10)).status, TrialStatus::kOk);
  done = true;
  other_node.join();
  unsetenv("FAKE_WORKER_ENV_LOG");
  EXPECT_EQ(group.launches(), 2);
  ASSERT_EQ(asked.size(), 1u) << "node 1 is told once, before node 0's workers end";
  EXPECT_TRUE(asked[0].relaunch);
  EXPECT_EQ(asked[0].trial, 1);
  EXPECT_EQ(to_string(asked[0].nccl_sockets), "2x4");
  std::ifstream in(env_log);
  std::vector<std::string> launches;
  for (std::string line; std::getline(in, line);) launches.push_back(line);
  EXPECT_EQ(launches, (std::vector<std::string>{"0 - -", "2x4 2 4"}));
}

TEST(TrialRunner, AGpuSessionsWorkersAreToldWhichNcclSocketsTheyRun) {
  WorkerLaunch l;
  l.pin_nccl_sockets = true;  // NCCL's choice: no NCCL variable, and no stored decision's either
  EXPECT_EQ(worker_environment(l), (process::Environment{{"NNODES", "1"}, {"ACSPEED_NCCL_SOCKETS", "0"}}));
  l.nccl_sockets = NcclSockets{4, 2};
  EXPECT_EQ(worker_environment(l), (process::Environment{{"NNODES", "1"},
                                                         {"ACSPEED_NCCL_SOCKETS", "4x2"},
                                                         {"NCCL_SOCKET_NTHREADS", "4"},
                                                         {"NCCL_NSOCKS_PERTHREAD", "2"}}));
}

TEST(TrialRunner, AGpuSessionsWorkersLogNcclsNetChoiceToTheWorkFolderUnlessTheJobSetsNcclsLogging) {
  TuneOptions o;
  o.gpus = 1;
  const WorkerLaunch gpu = make_launch(o, "/tmp/acspeed-tune-x");
  EXPECT_EQ(gpu.nccl_debug_file, "/tmp/acspeed-tune-x/nccl-net.%h.%p.log");
  const process::Environment env = worker_environment(gpu);
  EXPECT_EQ(process::Environment(env.end() - 3, env.end()),
            (process::Environment{{"NCCL_DEBUG", "INFO"},
                                  {"NCCL_DEBUG_SUBSYS", "INIT,NET"},
                                  {"NCCL_DEBUG_FILE", "/tmp/acspeed-tune-x/nccl-net.%h.%p.log"}}));
  o.gpus = 0;  // no NCCL on a CPU session
  EXPECT_EQ(make_launch(o, "/tmp/acspeed-tune-x").nccl_debug_file, "");
  o.gpus = 1;
  for (const char* own : {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"}) {
    testing::ScopedEnv set(own, "WARN");  // the job's own logging stays as it asked: not overridden
    const WorkerLaunch l = make_launch(o, "/tmp/acspeed-tune-x");
    EXPECT_EQ(l.nccl_debug_file, "") << own;
    for (const auto& [name, value] : worker_environment(l)) EXPECT_NE(name.rfind("NCCL_DEBUG", 0), 0u) << name;
  }
}

TEST_F(TrialRunnerTest, ANodeThatLeavesFailsTheTrialAtOnceAndEveryStartAfterIt) {
  two_nodes();
  const std::string held = gate(1);  // trial 1 never answers: only the node leaving ends it
  WorkerGroup group(launch_);
  auto node1 = std::make_unique<NodeLink>("127.0.0.1", launch_.master_port + 1, 1, std::chrono::seconds(5));
  ASSERT_EQ(group.run(request(0), std::chrono::seconds(10)).status, TrialStatus::kOk);
  std::thread leave([&] {
    if (wait_for(held + ".reached")) node1.reset();
  });
  const auto started = std::chrono::steady_clock::now();
  const auto outcome = group.run(request(1), std::chrono::seconds(120));
  leave.join();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(60));  // not the trial's timeout
  EXPECT_EQ(outcome.status, TrialStatus::kFailed);
  EXPECT_TRUE(outcome.node_lost);
  EXPECT_EQ(outcome.error.rfind("node 1 (127.0.0.1) left the session: its acspeed-tune closed the link to node 0", 0),
            0u)
      << outcome.error;
  EXPECT_EQ(processes_mentioning(dir_ + "/control.sock"), 0);
  // No relaunch waits for a node that cannot come back.
  const int launches = group.launches();
  try {
    group.start();
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("node 1 (127.0.0.1) left the session", 0), 0u) << e.what();
  }
  EXPECT_EQ(group.launches(), launches);
}

TEST(TrialRunner, TorchrunArgvCarriesTheLaunchWithoutAShell) {
  WorkerLaunch l;
  l.python = "/usr/bin/python3";
  l.worker_args = {"--model", "my pkg.mod:fn; rm -rf /"};
  l.nnodes = 2;
  l.node_rank = 1;
  l.nproc_per_node = 4;
  l.master_addr = "10.0.0.1";
  l.stack_dump_s = 6;
  const auto argv = torchrun_argv(l, 29500, "", "/tmp/w/workers-1");
  const std::vector<std::string> expected = {
      "/usr/bin/python3", "-m", "torch.distributed.run", "--nnodes=2", "--node_rank=1", "--nproc_per_node=4",
      "--master_addr=10.0.0.1", "--master_port=29500", "--max_restarts=0", "--log-dir=/tmp/w/workers-1.torchrun", "-m",
      std::string(kWorkerModule), "--model",
      "my pkg.mod:fn; rm -rf /", "--log-prefix", "/tmp/w/workers-1", "--stack-dump-s", "6"};
  EXPECT_EQ(argv, expected);  // one argv item, passed to execve as is; no --control off node 0
}

TEST(TrialRunner, WorkersCountNodesByTheLaunchNotByAStaleNnodes) {
  const char* saved = getenv("PYTHONPATH");
  const std::string saved_path = saved != nullptr ? saved : "";
  setenv("NNODES", "3", 1);
  setenv("PYTHONPATH", "/user/site", 1);
  WorkerLaunch l;
  l.nnodes = 2;
  l.python_path = "/opt/acspeed/python";
  const process::Environment expected = {{"NNODES", "2"}, {"PYTHONPATH", "/opt/acspeed/python:/user/site"}};
  EXPECT_EQ(worker_environment(l), expected);
  unsetenv("NNODES");
  unsetenv("PYTHONPATH");
  l.python_path.clear();
  EXPECT_EQ(worker_environment(l), (process::Environment{{"NNODES", "2"}}));
  if (saved != nullptr) setenv("PYTHONPATH", saved_path.c_str(), 1);
}

TEST(TrialRunner, RanksSharingGpusAreToldSo) {
  WorkerLaunch l;
  l.nnodes = 1;
  EXPECT_EQ(worker_environment(l), (process::Environment{{"NNODES", "1"}}));
  l.share_gpus = true;
  EXPECT_EQ(worker_environment(l), (process::Environment{{"NNODES", "1"}, {"ACSPEED_SHARE_GPUS", "1"}}));
}

}  // namespace
}  // namespace acspeed::tuner
