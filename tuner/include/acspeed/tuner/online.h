// Online tuning: acspeed-tune's engine run inside a user's own training job, driven by pushes.
//
// The job is cut into windows of steps (a step = one synchronised backward pass of the tuned DDP,
// its time on a rank = the interval between the first forwards of consecutive steps, max over ranks).
// The tuner owns everything that decides: which config each window runs, the pairing of candidate
// windows with baseline windows (the DDP the job's own arguments build), the steps a switch
// disturbs, "clearly slower", the pair statistics (statistics.h) and the verdict (decision_rule.h:
// kept only if the 95% interval of its paired speedup lies above 1, as offline). The caller only
// counts steps, times them and switches configs where it is told.
//
// The search. The candidates are the points of online_space(): the offline defaults' values of
// every knob whose row says it is switchable inside a live job (knobs.h), unless pinned (an ACSPEED_*
// variable, or a DDP argument the user passed); every other knob holds the job's value, so its
// default point is the baseline. The seeded coordinate descent (strategy.h) proposes them; the step
// model of a stored session of the same model, instance type and node count (online_step_model) only
// orders the values of each knob (a config it cannot forecast, such as one whose flow count has no
// link fit, first); it prunes and stops nothing. A point's cost is 1 / its paired speedup (the
// baseline's is 1), so the descent compares candidates measured at different phases of training.
//
// The windows. Every pair is a candidate window and a baseline window, adjacent; the order alternates
// from pair to pair over the whole exploration (B C | C B | B C ...), so each pair sees the same phase
// of training, drift cancels over pairs, and a candidate that keeps running across a pair boundary
// needs no switch. A window that runs another config than the window before starts with
// `discard_steps` disturbed steps (a rebuilt reducer, new process groups, first use of a hook), which
// are run but not measured. A search candidate gets `search_pairs` pairs; one whose first window's
// median is above (1 + slower_margin) x the latest baseline window's is dropped at once. The search's
// result (moving, as the descent does, from the baseline to a point measured later only when its cost
// is below (1 - min_gain) x the result's so far) then runs `decision_pairs` fresh pairs and is judged
// by the offline judge; when no point beat the baseline so, the job's own DDP stays without pairs.
// Where the results of the last windows are not known yet when a window must be planned
// (`lookahead`), and the current candidate has all its pairs planned, a short *wait* window runs
// meanwhile: `wait_steps` steps of the config of the window before (no switch, nothing discarded),
// phase "wait", in no pair, recorded but not used (so the number of pairs judged never depends on
// their results). With lookahead 2 a candidate's pair is followed by at most two waits, where a
// whole pair of ~2 x window_steps steps ran before. Exploration never plans beyond `max_windows`;
// the plan keeps room for the decision's pairs.
//
// How the Python side drives it (acspeed.online, in the DDP model's forward pre-hook; every rank
// counts the same steps):
//   - rank 0 builds the tuner at the first DDP of the job and broadcasts configs() (JSON, every
//     point's config by ordinal) with the lookup's broadcast; the first window starts after S
//     warm-up steps (compilation, allocator and loader warm-up);
//   - window k runs window(k).steps steps of window(k).config. Its boundary is the first forward of
//     the first step after it. With lookahead 0 (the default) the boundary makes two small
//     collectives on acspeed's own group: an all-reduce MAX of this rank's step times of window k
//     (padded to window_steps + discard_steps), which rank 0 pushes before it plans window k + 1,
//     then a broadcast of that window's ordinal from rank 0. The one-collective form carries
//     window k's times and rank 0's ordinal for window k + 2 in one all-reduce MAX (the other ranks
//     put -1): rank 0 plans that window before the collective, from windows <= k - 1, which is
//     lookahead 2; it costs two short wait windows per searched candidate (its result comes two
//     windows later) and a dropped candidate runs its pair's second window. acspeed.online issues
//     it asynchronously and waits for it at the next boundary (a blocking collective in a forward
//     pre-hook would deadlock under DDP.join()). The switch (a rebuilt reducer, a hook registered,
//     new lanes' groups created by every rank in one order) disturbs the window's first steps, which
//     the discarded steps cover.
//     Under DDP.join() a joined rank runs no forward: DDP's join hook shadows the others' forwards,
//     and it counts the steps there;
//   - a plan with `settled` set is the decision: from that window on it runs for good and no boundary
//     collective is issued again; rank 0 stores the evidence (evidence()) and windows() as a session
//     of kind online. A job that ends before settled() stores nothing unproven.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "acspeed/config.h"
#include "acspeed/roles_and_statuses.h"
#include "acspeed/store.h"
#include "acspeed/tuner/search_space.h"
#include "acspeed/tuner/step_model.h"

namespace acspeed::tuner {

// What online tuning searches in one job.
struct OnlineSpace {
  SearchSpace space;  // the switchable knobs' values; every other knob holds the job's value
  CommConfig baseline;  // the job's own DDP: the space's default point
};

// The space for a job of `world_size` ranks on `nnodes` nodes (`gpu`: the NCCL knobs' defaults
// apply) from the DDP arguments the user passed, by DDP's names as the knob rows' ddp_argument
// spell them ({"bucket_cap_mb": 50}), and the ACSPEED_* pins. An argument no knob row names, or a
// bad value, throws InvalidArgument naming it and the accepted names. `rebuild_reducer`: whether the job can
// rebuild its DDP reducer mid-job (the route of DistributedDataParallel.__setstate__); without it a
// switchable knob that is a DDP constructor argument (its row names a ddp_argument: bucket_mb) holds
// the job's value, and space.pinned says why.
OnlineSpace online_space(const nlohmann::json& ddp_arguments, int world_size, int nnodes, bool gpu,
                         bool rebuild_reducer = true);

// The step model of the newest stored session of this instance type, model signature and node count
// whose model knows the compute-only step and the gradients' payload (the same precision preferred);
// nullopt when there is none: the candidates are then measured in the descent's own order.
std::optional<StepModel> online_step_model(const Store& store, const std::string& instance_type,
                                           const std::string& model_signature, const std::string& precision,
                                           int nnodes);

struct OnlineOptions {
  uint64_t seed = 0;          // the descent's knob order; recorded with the evidence
  int window_steps = 10;      // measured steps per window (>= 3): the median of 10 steps
  int discard_steps = 2;      // steps run but not measured after a switch (>= 0)
  int search_pairs = 1;       // pairs of each searched candidate (>= 1)
  int decision_pairs = 3;     // fresh pairs of the chosen candidate that the judge decides on (>= 3)
  double slower_margin = 0.10;  // dropped after its first window when its median is above (1 + this) x the baseline's
  double min_gain = 0.03;     // the descent moves only for a cost below (1 - min_gain) x the incumbent's
  int lookahead = 0;          // windows whose results are still unknown when a window is planned (0..2)
  int wait_steps = 2;         // steps of a wait window (>= 1), run while the results that plan the next are awaited
  int max_windows = 48;       // windows of exploration at most (with 12-step windows: 576 steps)
  // Steps the job runs before window 0 (its warm-up, untimed): where window 0 starts among the job's
  // steps (WindowPlan::first_step); recorded with the evidence, it changes no plan.
  int warmup_steps = 0;
  std::optional<StepModel> model;  // orders the candidates (online_step_model); empty: descent's order
  int world_size = 0;         // the job's, for the model's forecast (0: the model's own)
  int nnodes = 0;
};

enum class WindowRole { kBaseline, kCandidate };

// What window k runs.
struct WindowPlan {
  int index = 0;
  size_t ordinal = 0;   // the config's point ordinal in the space (configs()[ordinal])
  CommConfig config;
  int steps = 0;        // steps the window runs: discard + measured
  int discard = 0;      // its first steps, disturbed by a switch: not measured
  // The job's step the window starts at, counting from 0 (the job's first synchronised backward):
  // warmup_steps + the steps of every window before it. Its last step is first_step + steps - 1.
  int64_t first_step = 0;
  WindowRole role = WindowRole::kBaseline;
  bool settled = false;  // the decision: this window and every later one run it; no boundary again
};

// One window as it ran: its plan, what it is evidence of, and its measured step times.
struct WindowRecord {
  WindowPlan plan;
  std::string phase;     // "search" | "decision" | "wait" | "settled"
  int pair = -1;         // the pair it belongs to (numbered over the exploration); -1: none
  bool used = false;     // its times entered a cost or the verdict (never a wait's, nor the rest of a dropped pair)
  std::vector<double> step_times_s;  // the measured steps (the disturbed ones left out)
  std::vector<double> raw_step_times_s;  // every step pushed
  bool pushed = false;
  // The trial role it is stored with (roles_and_statuses.h): decision pairs candidate/baseline, the
  // rest search.
  TrialRole trial_role() const;
};
void to_json(nlohmann::json& j, const WindowRecord& w);

class OnlineTuner {
 public:
  // Throws InvalidArgument for an option out of range (naming it and the accepted range).
  OnlineTuner(OnlineSpace space, OnlineOptions options);
  ~OnlineTuner();
  OnlineTuner(const OnlineTuner&) = delete;
  OnlineTuner& operator=(const OnlineTuner&) = delete;

  // The plan of window k. Known for every k already planned; k = the next one needs the results of
  // windows up to k - 1 - lookahead (else Error naming k and the windows pushed), unless settled.
  WindowPlan window(int k);
  // The raw step times of window k (max over ranks), every step of it: windows are pushed in order,
  // each once, after window(k). InvalidArgument for a wrong count or a time that is not > 0.
  void push(int k, const std::vector<double>& step_times_s);

  bool settled() const;
  // Once settled: the decision (the baseline when no candidate was proven faster), and its note.
  const CommConfig& decision() const;
  const std::string& note() const;
  std::optional<double> speedup() const;  // the decision's paired speedup and its 95% interval
  std::optional<double> ci_low() const;
  std::optional<double> ci_high() const;
  // The decision's evidence in the offline format (decision_evidence.h: seed, method, candidate,
  // search, pairs, speedups, pair_speedups) plus "online" (the window settings and counts, the
  // warm-up, and decision_from_step: the job's step the decision runs from).
  nlohmann::json evidence() const;
  const std::vector<WindowRecord>& windows() const;
  // Every point's config by ordinal, as JSON (what rank 0 broadcasts to the others).
  nlohmann::json configs() const;
  const OnlineSpace& space() const;
  // The most steps exploration can take (max_windows x (window_steps + discard_steps)).
  int max_exploration_steps() const;
  // The most steps one window runs (window_steps + discard_steps).
  int max_window_steps() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// The job a settled online tuner ran in, as its session and decision are keyed and described.
struct OnlineJob {
  DecisionKey key;         // instance type, model signature, precision, world size, nodes, GPUs shared
  std::string model_name;  // the module's class: "pkg.module.Class"
  int64_t batch_size = 0;  // per device: the leading dimension of the forward's first tensor
  std::string torch_version, nccl_version, cuda_version;
  nlohmann::json versions = nlohmann::json::object();  // stored as the session's versions_json
};

struct StoredOnline {
  int64_t session_id = 0;
  int64_t decision_id = 0;
  bool active = false;
  std::string inactive_because;  // "" when active: "decision #3 (offline) is active for this key"
};

// Stores a settled tuner as a session of kind online: every pushed window as a trial (its role from
// WindowRecord::trial_role, its measured steps, its metrics with the pair and the window), the
// decision with evidence() and the verdict, and the session done. The decision becomes the active
// one for its key unless an active decision of another kind (offline, or imported) holds the key:
// online tuning never deactivates one. Throws Error when the tuner has not settled; StoreError as
// the store does.
StoredOnline store_online(Store& store, const OnlineTuner& tuner, const OnlineJob& job);

}  // namespace acspeed::tuner
