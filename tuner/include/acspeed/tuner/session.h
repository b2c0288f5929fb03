// One tuning session, end to end: launch the trial workers once, search the space with the chosen
// strategy (every trial written to the store as it finishes), confirm the best candidate against
// DDP's defaults in alternated pairs (decision_rule.h), and store the decision (the candidate, or
// "keep DDP defaults") with its evidence. Node 0 coordinates and is the only store writer; other
// nodes only supervise their local workers.
//
// The engine knows no command line: it gets its options, a store opened for writing and an
// observer that is told what happens (acspeed-tune's progress display is one).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "acspeed/config.h"
#include "acspeed/precision.h"
#include "acspeed/roles_and_statuses.h"
#include "acspeed/store.h"
#include "acspeed/tuner/nccl_net.h"
#include "acspeed/tuner/search_space.h"
#include "acspeed/tuner/step_model.h"
#include "acspeed/tuner/trial_metrics.h"

namespace acspeed::tuner {

struct TuneOptions {
  // A torchvision name, pkg.module:name or path/to/file.py:name, name a torch.nn.Module class, a
  // function returning one, or a function returning (model, make_batch) (python/acspeed/_worker/models.py).
  std::string model;
  Precision precision = Precision::kFp32;
  int nproc_per_node = 2;            // ranks on this node
  // --share-gpus / ACSPEED_SHARE_GPUS=1: more ranks than GPUs may share them (device = local rank mod
  // GPUs, each rank its own NCCL host identity: python/acspeed/share_gpus.py). gpus_shared: they do
  // here (acspeed/gpu_sharing.h); the decision is then keyed and labelled so.
  bool share_gpus = false;
  int gpus = 0;                      // GPUs on this node (0: none found)
  bool gpus_shared = false;
  int nnodes = 1;                    // launch this many nodes (the key takes the workers' node count)
  // GPU sessions: NCCL's net as the plan saw it (nccl_net.h), which NCCL's own INFO line overrides
  // once the workers ran a trial.
  NcclNet nccl_net;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;               // 0: a free local port (single node); multi-node: required
  // Per trial and for the decision; tune_options_for() fills them from defaults.h.
  int batch_size = 0;                // per device
  int image_size = 0;                // torchvision models' input size
  int warmup = 0;                    // untimed steps per trial
  int steps = 0;                     // timed steps per trial
  int repeats = 0;                   // (candidate, baseline) pairs in the decision, >= 3
  // Bound on the search and the decision, minutes; 0 = none. The convergence guard's evidence has a
  // budget of its own (guard_budget_minutes) and a session its total (session_limit_minutes).
  double budget_minutes = 0;
  SearchSpace space;
  bool compression_searched = false; // the user asked for compression (it changes numerics)
  std::string strategy = "auto";
  uint64_t seed = 0;                 // --seed, else default_seed()
  int trial_timeout_s = 300;
  double loss_tolerance = 0.05;      // compression: |loss - baseline loss| <= tol x |baseline loss|
  // Compression: steps of the convergence guard's loss trajectories (convergence_guard.h), apart
  // from the timed steps; the step inflation (inflation.h) can measure up to about T / (T / 3) = 3.
  // 120: on resnet18 with real data 60 steps left every inflation's upper end at 2.5-3.4, 120 bound
  // them to 1.5-1.7 (bench/compression/RESULTS.md, "Which loss signal can 60 steps judge?").
  int trajectory_steps = 120;
  // pkg.module:function (rank, world_size, batch_size) -> iterable of (inputs, targets): the batches
  // of the trials, the fidelity window and the trajectories (python/acspeed/_worker/batches.py); "" = the
  // model's make_batch for the trials, a learnable sequence of synthetic batches for the trajectories.
  std::string data;
  // The folder acspeed-tune was started in: the workers (on this node) and the dry run's check find a
  // relative --model or --data file or module from there.
  std::string start_dir;
  std::optional<int64_t> resume;     // session to continue
  std::string python;                // interpreter of the workers (python_interpreter.h)
  std::string python_path;           // put in front of the workers' PYTHONPATH: this build's package
  std::vector<std::string> notes;    // defaults shrunk for a CPU-only machine etc., announced first
  std::vector<std::string> args;     // the tune arguments as given (stored; --resume re-reads them)
  std::vector<std::string> command_line;  // the whole command line, stored with the session
};

// The seed of a session given none (--seed): from the job, so that the same command gets the same
// seed, hence the same synthetic batches, initial weights and guard trajectories, and a rerun
// differs from it only by the step times it measures (bench/compression/RESULTS.md: with a seed drawn
// at random per session, three reruns of one command stored two numerics families). The job: model,
// --data, precision, batch and image size, nodes and ranks per node, trajectory steps. In [0, 2^31).
uint64_t default_seed(const TuneOptions& options);

// Options with the defaults of this machine's row in defaults.h (`gpu` = a GPU was found).
TuneOptions tune_options_for(bool gpu);

// The convergence guard's own budget, minutes (0: no bound): kGuardBudgetFactor x budget_minutes
// (convergence_guard.h).
double guard_budget_minutes(const TuneOptions& options);

// What the budgets give a session of `options`, minutes (0: no bound): budget_minutes, plus the
// guard's own where compression is searched. A --compression session may pass it by its numerics'
// first trials (one per family asked for), which run whatever the budgets say.
double session_limit_minutes(const TuneOptions& options);

// One finished trial, as the observer sees it.
struct TrialEvent {
  int64_t ordinal = 0;
  TrialRole role = TrialRole::kSearch;
  std::string label;   // what it ran: the config, or "pair 2 DDP defaults"
  TrialStatus status = TrialStatus::kOk;
  std::string error;
  TrialMetrics metrics;  // status ok: what it measured
  // The step model's bound for this config (step_model.h) and its predicted step, once the session
  // is calibrated; efficiency = bound / measured p50.
  std::optional<double> bound_s, predicted_s;
  // The best search result so far (cost = median step time x the upper end of its step inflation,
  // 1 without compression; s), when there is one.
  std::optional<CommConfig> best_config;
  double best_cost_s = 0;
};

// One search result, for the summary after the search.
struct SearchResult {
  CommConfig config;
  TrialStatus status;
  double cost_s;       // median step time x the upper end of its inflation; infinite when failed, rejected
                       // or of an infinite or unmeasurable inflation
  TrialMetrics metrics;
  std::optional<double> bound_s;  // the step model's bound, when calibrated
};

// What a session tells whoever runs it. Called from the session's thread.
class SessionObserver {
 public:
  virtual ~SessionObserver() = default;
  // A line for people that is not a trial (phase changes, notes, the decision).
  virtual void note(const std::string& text) = 0;
  // Trial `label` starts; `done` of about `planned` trials are finished.
  virtual void trial_started(int done, int planned, const std::string& label) = 0;
  virtual void trial_finished(const TrialEvent& trial) = 0;
  // The search is over: every result, fastest first.
  virtual void search_finished(const std::vector<SearchResult>& results) = 0;
};

struct SessionResult {
  enum class Status { kDone, kInterrupted, kFailed };
  Status status = Status::kFailed;
  int signal = 0;                 // kInterrupted: the signal
  bool usage_error = false;       // kFailed because of what the user asked (an unbuildable --model...)
  std::string error;              // kFailed: why
  int64_t session_id = 0;         // 0 when no session was stored
  int64_t trials_stored = 0;
  std::string kept_logs;          // the worker logs' folder when it was kept (a failure), else ""
};

// The plan: what a dry run prints and a real run announces, one line per item.
std::vector<std::string> plan_lines(const TuneOptions& options, const std::string& instance_type);

// Runs, without torchrun, the check of --model and --data every worker runs when it starts
// (python/acspeed/_worker/check.py: the model built once on the CPU, its first batch through forward
// and loss, as rank 0 of the session's world size) and returns its line. Throws InvalidArgument with
// the check's message when the model or data cannot be used, Error when the check itself failed.
std::string check_model(const TuneOptions& options);

// Node 0: runs the session against `store` (opened for writing). Never throws for the session's own
// failures: they are in the result.
SessionResult run_session(const TuneOptions& options, Store& store, SessionObserver& observer);

// Nodes other than 0: links to node 0's tuner, launches the local workers and relaunches them
// whenever they fail (reporting to node 0 what they left), until node 0 ends the session. The work
// folder is removed, or kept and named when a launch failed. Throws Error when no rendezvous
// happened for long or node 0 went away, and process::Interrupted.
void supervise_node(const TuneOptions& options, SessionObserver& observer);

}  // namespace acspeed::tuner
