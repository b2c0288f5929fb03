// Naming the rank that made a trial fail from what one launch leaves behind (tuner/src/rank_failure.h):
// torchrun's failure table, each rank's log and error record, and the faulthandler dumps of a hang.
// The launcher text below is torch 2.15's, captured from a run where rank 1 exited with status 3.
#include "rank_failure.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "worker_module.h"

namespace acspeed::tuner {
namespace {

constexpr const char* kTorchrunTable = R"(E1203 18:20:40.087000 7977 api.py:1002] failed (exitcode: 3) local_rank: 1 (pid: 8068) of binary: /usr/bin/python3
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
acspeed._worker.worker FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-12-03_18:20:40
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : %RANK0% (pid: 8067)%NOTE%
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 8067
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-03_18:20:39
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : %RANK1% (pid: 8068)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
)";

constexpr const char* kGlooError =
    "RuntimeError: [pair.cc:561] Connection closed by peer [127.0.0.1]:58051. This is typically caused by a remote "
    "worker crashing. GLHF!";

class RankFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/acspeed-rank-failure-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    prefix_ = dir_ + "/workers-1";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }
  void launcher(const std::string& rank0, const std::string& rank1) {
    std::string text = kTorchrunTable;
    text.replace(text.find("%RANK0%"), 7, rank0);
    text.replace(text.find("%NOTE%"), 6, rank0 == "-15" ? "  (SIGTERM)" : "");
    text.replace(text.find("%RANK1%"), 7, rank1);
    write(prefix_ + ".log", text);
  }
  void rank_log(int rank, const std::string& text) { write(prefix_ + "-rank" + std::to_string(rank) + ".log", text); }
  void caught(int rank, const std::string& error, double at) {
    write(prefix_ + "-rank" + std::to_string(rank) + ".failed.json",
          record_json(rank, error, at));
  }
  static std::string record_json(int rank, const std::string& error, double at) {
    return "{\"rank\": " + std::to_string(rank) + ", \"trial\": 4, \"error\": \"" + error +
           "\", \"monotonic_s\": " + std::to_string(at) + "}";
  }
  std::string explain() {
    const auto why = explain_rank_failure(gather_rank_evidence(prefix_, prefix_ + ".log"));
    return why.value_or("<nothing>");
  }

  std::string dir_, prefix_;
};

// A frame of the worker's own module (worker_module.h), as faulthandler writes it.
std::string worker_frame(int line, const std::string& function) {
  return "  File \"/repo/python/" + worker_source_file() + "\", line " + std::to_string(line) + " in " + function + "\n";
}

TEST(WorkerModule, NamesTheWorkersSourceFile) {
  // The launcher runs this module and the stack reader looks for its file: a move must move both.
  EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::path(ACSPEED_PYTHON_SOURCE) / worker_source_file()))
      << worker_source_file();
}

TEST(TorchrunExitCodes, EveryFailedRankOfTheTableWithSignalsInTheProcessConvention) {
  std::string text = kTorchrunTable;
  text.replace(text.find("%RANK0%"), 7, "-15");
  text.replace(text.find("%NOTE%"), 6, "  (SIGTERM)");
  text.replace(text.find("%RANK1%"), 7, "3");
  EXPECT_EQ(torchrun_exit_codes(text), (std::map<int, int>{{0, 128 + 15}, {1, 3}}));
  EXPECT_TRUE(torchrun_exit_codes("rank 0 hello\nno table here\n").empty());
}

TEST_F(RankFailureTest, ARankThatExitedSilentlyIsTheCauseNotThePeerThatLostIt) {
  launcher("1", "3");
  rank_log(0, std::string(kWorkerModule) + " rank 0: trial 4 failed: " + kGlooError + "\n");
  caught(0, kGlooError, 100.5);
  rank_log(1, "loading\n\nabout to leave with status 3\n");
  const std::string why = explain();
  EXPECT_EQ(why.rfind("rank 1 ended with exit code 3 without reporting an error; last lines of its log: loading | "
                      "about to leave with status 3 (log: ",
                      0),
            0u)
      << why;
  EXPECT_EQ(why.find("GLHF"), std::string::npos) << why;
}

TEST_F(RankFailureTest, ASignalIsNamed) {
  launcher("-15", "-9");
  rank_log(0, "");
  rank_log(1, "step 1\n");
  EXPECT_NE(explain().find("rank 1 ended with signal 9 (SIGKILL: Killed)"), std::string::npos) << explain();
}

TEST_F(RankFailureTest, TheRankThatCaughtItsErrorFirstIsTheCause) {
  launcher("1", "1");
  rank_log(0, "Traceback (most recent call last):\nRuntimeError: Connection closed by peer\n");
  caught(0, kGlooError, 100.9);
  rank_log(1, "Traceback (most recent call last):\n  File \"m.py\", line 3, in forward\nRuntimeError: injected\n");
  caught(1, "RuntimeError: injected", 100.2);
  EXPECT_EQ(explain(),
            "rank 1 failed: RuntimeError: injected; last lines of its log: Traceback (most recent call last): | "
            "File \"m.py\", line 3, in forward | RuntimeError: injected (log: " + prefix_ + "-rank1.log)");
}

TEST_F(RankFailureTest, ARankTorchrunEndedWithSigtermIsNotTheCause) {
  launcher("-15", "1");
  rank_log(0, "");
  rank_log(1, "RuntimeError: DefaultCPUAllocator: can't allocate memory\n");
  caught(1, "RuntimeError: DefaultCPUAllocator: can't allocate memory", 7);
  EXPECT_EQ(explain().rfind("rank 1 failed: RuntimeError: DefaultCPUAllocator", 0), 0u) << explain();
}

TEST_F(RankFailureTest, ARankWhoseLauncherWasKilledWentDownWithIt) {
  // torchrun was killed: no failure table; its rank died by its parent-death signal, reporting nothing.
  write(prefix_ + ".log", "[W socket.cpp:207] The hostname of the client socket cannot be retrieved\n");
  rank_log(0, std::string(kWorkerModule) + " rank 0: trial 4 failed: " + kGlooError + "\n");
  caught(0, kGlooError, 100.5);
  rank_log(1, "step 1\n");
  const auto killed = explain_rank_failure(gather_rank_evidence(prefix_, prefix_ + ".log", 128 + 9));
  ASSERT_TRUE(killed);
  EXPECT_EQ(*killed, "rank 1 went down with its launcher (torchrun), which ended with signal 9 (SIGKILL: Killed); "
                     "last lines of its log: step 1 (log: " + prefix_ + "-rank1.log)");
  // A launcher that exited (it writes its table when a rank fails) blames no rank: the first error stands.
  const auto exited = explain_rank_failure(gather_rank_evidence(prefix_, prefix_ + ".log", 1));
  ASSERT_TRUE(exited);
  EXPECT_EQ(exited->rfind("rank 0 failed: RuntimeError: [pair.cc:561] Connection closed by peer", 0), 0u) << *exited;
}

TEST(RankFailure, ARankOfAnotherNodeIsNamedWithItsNodeAndBeatsThePeerThatLostIt) {
  RankEvidence lost_peer;
  lost_peer.rank = 0;
  lost_peer.node = 0;
  lost_peer.exit_code = 1;
  lost_peer.error = kGlooError;
  lost_peer.caught_at_s = 10.2;
  RankEvidence died;
  died.rank = 3;
  died.node = 1;
  died.exit_code = 3;
  died.log_path = "/tmp/acspeed-tune-x/workers-2-rank3.log";
  died.log_tail = {"tiny_models: firing exit"};
  EXPECT_EQ(explain_rank_failure({lost_peer, died}),
            "rank 3 (node 1) ended with exit code 3 without reporting an error; last lines of its log: "
            "tiny_models: firing exit (log: /tmp/acspeed-tune-x/workers-2-rank3.log on node 1)");
  // Both caught an error: the one caught first, whichever node it was on.
  died.exit_code = 1;
  died.error = "RuntimeError: injected";
  died.caught_at_s = 10.1;
  EXPECT_EQ(explain_rank_failure({lost_peer, died}).value_or("").rfind("rank 3 (node 1) failed: RuntimeError: injected",
                                                                       0),
            0u);
}

TEST_F(RankFailureTest, NoEvidenceNamesNoRank) {
  write(prefix_ + ".log", "ModuleNotFoundError: No module named 'torch'\n");
  EXPECT_EQ(explain(), "<nothing>");
}

TEST_F(RankFailureTest, AHangSaysWhereEachRanksStackWas) {
  // The worker's main thread is found by its module's file, whichever thread faulthandler lists first.
  rank_log(0, R"(step log
Timeout (0:00:06)!
Thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 324 in wait
Thread 0x00007f0000000002 (most recent call first):
  File "/site-packages/torch/autograd/graph.py", line 829 in _engine_run_backward
  File "/site-packages/torch/_tensor.py", line 625 in backward
)" + worker_frame(264, "run") + worker_frame(470, "main"));
  rank_log(1, R"(Timeout (0:00:06)!
Thread 0x00007f0000000004 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 324 in wait
Thread 0x00007f0000000003 (most recent call first):
  File "/site-packages/torch/distributed/distributed_c10d.py", line 4805 in barrier
  File "/repo/tests/tuner/tiny_models.py", line 61 in forward
)" + worker_frame(470, "main"));
  EXPECT_EQ(where_ranks_were(gather_rank_evidence(prefix_, prefix_ + ".log")),
            "rank 0 in _engine_run_backward (graph.py:829) from run (worker.py:264); "
            "rank 1 in barrier (distributed_c10d.py:4805) from forward (tiny_models.py:61)");
}

TEST_F(RankFailureTest, AStackCutAtFaulthandlersLimitStillSaysWhere) {
  rank_log(0, R"(Timeout (0:00:11)!
Thread 0x00007f0000000001 (most recent call first):
  File "/site-packages/torch/_ops.py", line 126 in py_impl
  File "<frozen importlib._bootstrap>", line 241 in _call_with_frames_removed
  File "/site-packages/torch/_inductor/__init__.py", line 12 in <module>
  ...
)");
  EXPECT_EQ(where_ranks_were(gather_rank_evidence(prefix_, prefix_ + ".log")),
            "rank 0 in py_impl (_ops.py:126)");
}

TEST_F(RankFailureTest, RanksOfSeveralNodesAreNamedWithTheirNodeAndTheirLogs) {
  rank_log(0, R"(Timeout (0:00:11)!
Thread 0x00007f0000000002 (most recent call first):
  File "/site-packages/torch/autograd/graph.py", line 829 in _engine_run_backward
)" + worker_frame(264, "run"));
  auto ranks = gather_rank_evidence(prefix_, prefix_ + ".log");
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_EQ(ranks[0].stack, "_engine_run_backward (graph.py:829) from run (worker.py:264)");
  ranks[0].node = 0;
  // Another node's rank, as its report brought it: the stack was read there.
  RankEvidence other;
  other.rank = 1;
  other.node = 1;
  other.log_path = "/tmp/n1/workers-3-rank1.log";
  other.stack = "_fire_next_fault (tiny_models.py:80)";
  ranks.push_back(other);
  RankEvidence no_log;  // a rank that left no log is not listed
  no_log.rank = 2;
  no_log.node = 1;
  ranks.push_back(no_log);
  EXPECT_EQ(where_ranks_were(ranks), "rank 0 (node 0) in _engine_run_backward (graph.py:829) from run (worker.py:264); "
                                     "rank 1 (node 1) in _fire_next_fault (tiny_models.py:80)");
  EXPECT_EQ(rank_logs(ranks), prefix_ + "-rank*.log on node 0, /tmp/n1/workers-3-rank*.log on node 1");
}

TEST_F(RankFailureTest, OneLaunchsLogsAreOnePattern) {
  rank_log(0, "a\n");
  rank_log(1, "b\n");
  EXPECT_EQ(rank_logs(gather_rank_evidence(prefix_, prefix_ + ".log")), prefix_ + "-rank*.log");
}

TEST_F(RankFailureTest, ARankWithoutADumpSaysSo) {
  rank_log(0, "no dump here\n");
  EXPECT_EQ(where_ranks_were(gather_rank_evidence(prefix_, prefix_ + ".log")), "rank 0 left no stack dump");
}

}  // namespace
}  // namespace acspeed::tuner
