// Which rank made a trial fail, and how: the evidence one node's workers leave behind, read after
// the launcher (torchrun) has ended, and the one-line reason a trial is stored with.
//
// A rank that dies takes the others down with it: they lose it as a peer ("Connection closed by
// peer ... GLHF"), so the first error rank 0 sees is usually not the cause. The evidence:
//  - torchrun's failure table in the launch's log: each failed local rank's exit code (negative:
//    the signal that ended it);
//  - each rank's own log, PREFIX-rankR.log (acspeed/_worker/worker.py --log-prefix);
//  - PREFIX-rankR.failed.json from a rank that caught an error in a trial: the error and when it was
//    caught, on the node's monotonic clock.
// The cause is a rank that ended abnormally without catching an error (an exit status, a signal,
// the kernel's OOM killer), else a rank whose launcher was killed (the ranks die with it: no failure
// table, no error), else the rank that caught its error first: the others failed after it.
// SIGTERM is how torchrun ends the ranks left after a failure: a rank it ended is not the cause.
// In a session of several nodes, the other nodes' evidence comes to node 0 over the node link
// (node_link.h) and each rank is named with its node.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace acspeed::tuner {

struct RankEvidence {
  int rank = 0;
  std::optional<int> node;       // several nodes: the node it ran on (its log is there)
  std::optional<int> exit_code;  // process/include/acspeed/process/exit_status.h convention: status, or 128 + signal
  // A rank missing from the failure table: how its launcher ended (a killed launcher writes none).
  std::optional<int> launcher_exit_code;
  std::optional<std::string> error;  // what the rank caught (its .failed.json)
  double caught_at_s = 0;            // when, CLOCK_MONOTONIC (of node 0, for another node's rank)
  std::string log_path;              // its own log ("" when it has none)
  std::vector<std::string> log_tail;  // the last non-empty lines of that log
  // Where its main thread was in the last stack dump in that log (faulthandler, worker.py
  // --stack-dump-s): "barrier (distributed_c10d.py:4805) from forward (m.py:9)"; read on the rank's
  // own node, so another node's travels in its report.
  std::optional<std::string> stack;
};

// torchrun's failure table ("rank : 1 (local_rank: 1)" / "exitcode : -9 (pid: ...)") in its
// output: global rank -> exit code in the process library's convention (-9 becomes 128 + 9).
std::map<int, int> torchrun_exit_codes(std::string_view launcher_output);

// Every rank of one launch: PREFIX-rankR.log and .failed.json, and the exit codes in the
// launcher's log. Missing or unreadable files leave the fields empty. `launcher_exit_code`: how the
// launcher ended, when it has (given to the ranks its failure table does not list).
std::vector<RankEvidence> gather_rank_evidence(const std::string& log_prefix, const std::string& launcher_log,
                                               std::optional<int> launcher_exit_code = std::nullopt);

// "rank 1 ended with signal 9 (SIGKILL: Killed) without reporting an error; last lines of its log:
// a | b | c (log: PATH)", "rank 1 went down with its launcher (torchrun), which ended with signal 9
// ...", or "rank 1 failed: RuntimeError: ...; last lines ..."; a rank with a node is "rank 1 (node 1)"
// and its log "(log: PATH on node 1)". nullopt when the evidence names no rank (the launcher itself
// failed, or the ranks left no trace).
std::optional<std::string> explain_rank_failure(const std::vector<RankEvidence>& ranks);

// For a trial that timed out: where each rank's Python stack was when the worker's faulthandler
// dumped it (RankEvidence::stack): "rank 0 in _engine_run_backward (graph.py:829); rank 1 in
// forward (tiny_models.py:48)", "rank 1 (node 1) in ..." on another node; a rank without a dump
// "left no stack dump". "" when no rank has a log.
std::string where_ranks_were(const std::vector<RankEvidence>& ranks);

// Where the ranks' logs are, one pattern per launch: "/tmp/a/workers-2-rank*.log", with several
// nodes "/tmp/a/workers-2-rank*.log on node 0, /tmp/b/workers-1-rank*.log on node 1".
std::string rank_logs(const std::vector<RankEvidence>& ranks);

}  // namespace acspeed::tuner
