// Long-lived trial workers: `python -m torch.distributed.run ... -m acspeed._worker.worker` (worker_module.h) launched once
// and reused for every trial (re-wrapping DDP in live workers costs <= 1.5 s, a fresh launch 3-11 s).
//
// The tuner listens on a Unix socket in its work folder; rank 0 connects and speaks protocol.h.
// torchrun runs in its own process group with a parent-death signal, and every rank asks for one
// too (python/acspeed/_worker/worker.py), so workers die with the tuner, even on kill -9. A trial that fails or
// outlives its timeout ends the workers (a rank that failed inside a collective cannot rejoin);
// the next trial starts fresh ones. The workers are started by the process library (no shell sees
// user strings); waits give up with process::Interrupted when SIGINT/SIGTERM/SIGHUP arrives.
//
// Several nodes: node 0's group also holds the node link (node_link.h) to the acspeed-tune of every
// other node, which restarts that node's workers whenever they end (supervise_workers) and reports
// what they left behind; a trial's failure is explained from every node's ranks, a timed-out
// trial ends every node's workers and says where each node's ranks were, and a node whose
// acspeed-tune is gone fails the trial at once and every start after it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "acspeed/process/spawn.h"
#include "acspeed/roles_and_statuses.h"
#include "line_reader.h"
#include "protocol.h"
#include "rank_failure.h"

namespace acspeed::tuner {

class NodeLinks;

struct WorkerLaunch {
  std::string python;                    // interpreter (ACSPEED_PYTHON / the recorded one)
  std::string python_path;               // prepended to PYTHONPATH: where the acspeed package lives
  std::vector<std::string> worker_args;  // after `-m acspeed._worker.worker`: --model NAME --batch-size N ...
  int nnodes = 1;
  int node_rank = 0;
  int nproc_per_node = 2;
  bool share_gpus = false;  // the ranks outnumber the GPUs: each gets ACSPEED_SHARE_GPUS=1 (share_gpus.py)
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free local port for each launch (single node only); several nodes: the
                        // rendezvous port, and the node link's is the next one (node_link.h)
  std::string work_dir;  // socket and worker logs (must exist)
  std::chrono::seconds start_timeout{600};  // from launch to rank 0's hello (model build, rendezvous)
  int stack_dump_s = 0;  // > 0: a trial running this long dumps every rank's stack into its log
  // NCCL's sockets the workers run with (an instance knob, knobs.h's before_communicator: NCCL reads
  // them once per process, so a trial with another value runs in workers launched again with it;
  // nullopt: NCCL's choice). With pin_nccl_sockets (GPU sessions) every launch says which it runs
  // (ACSPEED_NCCL_SOCKETS), so that `import acspeed` in a worker never applies a stored decision's.
  std::optional<NcclSockets> nccl_sockets;
  bool pin_nccl_sockets = false;
  // Non-empty (GPU sessions whose environment sets none of NCCL_DEBUG, NCCL_DEBUG_SUBSYS and
  // NCCL_DEBUG_FILE: the job's own logging stays as it is): NCCL's INFO lines of its INIT and NET
  // subsystems go to this file (NCCL expands %h and %p: one file per rank and launch), not to the
  // ranks' logs, so that the session reads which net NCCL chose (nccl_net.h) without flooding them.
  std::string nccl_debug_file;
};

// The prefix of the files nccl_debug_file names in the work folder (kNcclNetLog + "%h.%p.log").
inline constexpr std::string_view kNcclNetLog = "nccl-net.";

// What the workers' environment gets over the tuner's: the acspeed package in front of PYTHONPATH,
// NNODES = the launch's node count, so the node count the worker records and looks decisions up
// with is the launch's, not a stale NNODES the tuner itself inherited, ACSPEED_SHARE_GPUS=1 when
// the ranks share GPUs, with pin_nccl_sockets ACSPEED_NCCL_SOCKETS and, for a value other than
// NCCL's choice, NCCL_SOCKET_NTHREADS and NCCL_NSOCKS_PERTHREAD, and with nccl_debug_file
// NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET and NCCL_DEBUG_FILE.
process::Environment worker_environment(const WorkerLaunch& launch);

struct TrialOutcome {
  TrialStatus status = TrialStatus::kFailed;
  std::string error;  // failed / timeout: why
  TrialReply reply;   // ok: what rank 0 reported
  double wall_s = 0;  // request to result, as the tuner saw it
  bool node_lost = false;  // failed because a node's acspeed-tune is gone: no later trial can run
};

// The argv that launches one node's workers (shown by --dry-run, used by WorkerGroup); each rank
// logs to LOG_PREFIX-rankR.log (rank_failure.h), torchrun itself under LOG_PREFIX.torchrun/ (by
// default each launch would leave a /tmp/torchelastic_* folder behind).
std::vector<std::string> torchrun_argv(const WorkerLaunch& launch, int master_port, const std::string& control,
                                       const std::string& log_prefix);

// Removes torchrun's own folders from a work folder whose worker logs are kept (they hold nothing
// the ranks' logs and failure records do not).
void remove_torchrun_logs(const std::string& work_dir);

class WorkerGroup {
 public:
  // Node 0 only: the group this tuner talks to; with several nodes it listens for the node link.
  explicit WorkerGroup(WorkerLaunch launch);
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // Launches the workers unless they run, and waits for rank 0's hello. Throws InvalidArgument when
  // the --model names nothing buildable, Error with the workers' own error for other failures to
  // start (rendezvous timeout, out of memory...) and at once, naming it, when a node left the session.
  const WorkerHello& start();
  // Runs one trial (starting workers first when needed; a config whose NCCL sockets differ from the
  // running workers' ends them, on every node, and launches them again with its value). Never throws
  // for a trial's own failure.
  // A failed trial's error names the rank that failed first, on whichever node, its exit status or
  // signal and the last lines of its log (rank_failure.h), not the error its peers saw when it went;
  // a timed-out trial's says where each rank's stack was, on every node (the other nodes are asked
  // to end their workers and report); a node that left the session is named first (node_lost).
  TrialOutcome run(const TrialRequest& request, std::chrono::seconds timeout);
  // Asks idle workers to end, then kills what is left (workers in a trial cannot hear it: killed).
  void stop();

  int launches() const { return launches_; }

 private:
  void launch();
  void kill_workers();
  // The next trial runs with other NCCL sockets: every node's workers end, to start again with them.
  void switch_nccl_sockets(const TrialRequest& request);
  std::optional<std::string> read_line(std::chrono::steady_clock::time_point deadline, bool* eof);
  // Every rank's evidence: this node's, and what the other nodes reported since the trial began.
  std::vector<RankEvidence> evidence() const;
  std::string failure_text() const;
  void await_evidence();
  std::optional<std::string> node_lost();
  bool child_alive();

  WorkerLaunch launch_;
  std::string socket_path_;
  int listen_fd_ = -1;
  int conn_fd_ = -1;
  pid_t child_ = -1;
  int child_exit_ = 0;  // exit code once reaped (process/include/acspeed/process/exit_status.h)
  bool child_reaped_ = false;
  bool in_trial_ = false;  // a request was sent and its result not read
  LineReader lines_;  // what rank 0 sent
  std::string log_path_;    // the launcher's (torchrun's) output
  std::string log_prefix_;  // the ranks' own logs: PREFIX-rankR.log
  int launches_ = 0;
  std::optional<WorkerHello> hello_;
  std::unique_ptr<NodeLinks> links_;  // several nodes only
};

// Nodes other than 0: links to node 0's tuner (node_link.h), launches the local workers and
// relaunches them whenever they end abnormally (a failed trial: node 0 restarts its own) or node 0
// asks for their end (a trial timed out: they are killed), reporting each time what they left
// behind, until the workers end cleanly (node 0 sent "stop"; returns the
// number of launches that did not) or `give_up` passes without a successful rendezvous (throws
// Error). When node 0 closes the link its session is over: the workers get a grace period to end
// cleanly, then are killed, and a failure is not relaunched (throws Error). What happens goes to
// `note`; throws process::Interrupted when interrupted (the workers killed).
int supervise_workers(const WorkerLaunch& launch, std::chrono::seconds give_up,
                      const std::function<void(const std::string&)>& note);

}  // namespace acspeed::tuner
