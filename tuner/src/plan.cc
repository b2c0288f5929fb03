#include "plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "acspeed/tuner/convergence_guard.h"
#include "acspeed/tuner/defaults.h"
#include "acspeed/tuner/session.h"
#include "acspeed/tuner/strategy.h"
#include "decision_evidence.h"
#include "guard.h"
#include "worker_launch.h"

namespace acspeed::tuner {

int planned_search_trials(const std::string& strategy, const SearchSpace& space) {
  if (strategy == "grid") return static_cast<int>(space.size());
  // model: at most descent's count (it prunes what the model predicts slower; descent is its fallback)
  int n = 1;  // the start, then one sweep over every knob (further sweeps only when it moved)
  for (size_t d : space.dims()) n += static_cast<int>(d) - 1;
  return n;
}

TuneOptions tune_options_for(bool gpu) {
  const TuneDefaults& d = tune_defaults(gpu);
  TuneOptions o;
  o.nproc_per_node = d.nproc_per_node;
  o.batch_size = d.batch_size;
  o.image_size = d.image_size;
  o.warmup = d.warmup;
  o.steps = d.steps;
  o.repeats = d.repeats;
  o.budget_minutes = d.budget_minutes;
  o.space.bucket_mb = d.bucket_mb;
  o.space.streams = d.streams;
  return o;
}

double guard_budget_minutes(const TuneOptions& o) { return o.budget_minutes * kGuardBudgetFactor; }

double session_limit_minutes(const TuneOptions& o) {
  return o.budget_minutes + (guard_options(o).active ? guard_budget_minutes(o) : 0);
}

std::vector<std::string> plan_lines(const TuneOptions& o, const std::string& instance_type) {
  std::vector<std::string> lines;
  for (const auto& note : o.notes) lines.push_back(fmt::format("note: {}", note));
  std::string head = fmt::format("plan: tune {} ({} precision) on {}: {} node(s) x {} rank(s), batch {} per device",
                                 o.model, to_string(o.precision), instance_type, o.nnodes, o.nproc_per_node, o.batch_size);
  if (o.model.find(':') == std::string::npos) head += fmt::format(", {}x{} images", o.image_size, o.image_size);
  lines.push_back(head);
  if (o.gpus_shared) {
    lines.push_back(fmt::format("  GPUs: {} ranks per node share {} GPU{} (--share-gpus): device = local rank mod {}, "
                                "an NCCL host identity per rank; the decision applies only to jobs that share GPUs",
                                o.nproc_per_node, o.gpus, o.gpus == 1 ? "" : "s", o.gpus));
  }
  lines.push_back(fmt::format("  search space: {}", o.space.describe()));
  for (const auto& pinned : o.space.pinned) lines.push_back(fmt::format("  pinned (not searched): {}", pinned));
  const std::string strategy_name = resolve_strategy_name(o.strategy, o.space, o.nnodes);
  std::string summary;
  for (const auto& info : strategies()) {
    if (info.name == strategy_name) summary = info.summary;
  }
  lines.push_back(fmt::format("  strategy: {}: {} ({} {} trial(s)), seed {}", strategy_name, summary,
                              strategy_name == "grid" ? "exactly" : "about",
                              planned_search_trials(strategy_name, o.space), o.seed));
  lines.push_back(fmt::format("  each trial: {} warm-up + {} timed steps, timeout {} s; decision: {} alternated pairs vs "
                              "DDP defaults",
                              o.warmup, o.steps, o.trial_timeout_s, o.repeats));
  if (o.compression_searched) {
    lines.push_back(fmt::format("  compression: the convergence guard trains {}-step loss trajectories (one per "
                                "numerics, one uncompressed) on {}, up to {} steps where the inflation cannot "
                                "decide; configs are ranked by p50 x the upper end of their step inflation",
                                o.trajectory_steps, guard_data(o), o.trajectory_steps * kTrajectoryCapFactor));
  }
  if (o.budget_minutes > 0 && guard_options(o).active) {
    lines.push_back(fmt::format("  time budget: {:g} min for the search and the decision, and {:g} min of its own for the "
                                "convergence guard's windows and trajectories: about {:g} min in all",
                                o.budget_minutes, guard_budget_minutes(o), session_limit_minutes(o)));
  } else if (o.budget_minutes > 0) {
    lines.push_back(fmt::format("  time budget: {:g} min for the whole session", o.budget_minutes));
  }
  if (o.resume) lines.push_back(fmt::format("  resuming session {}", *o.resume));
  const std::string work_dir = work_dir_pattern();
  WorkerLaunch launch = make_launch(o, work_dir);
  auto argv = torchrun_argv(launch, o.master_port, o.node_rank == 0 ? work_dir + "/control.sock" : "",
                            work_dir + "/workers-N");
  for (auto& arg : argv) {
    if (arg == "--master_port=0") arg = "--master_port=<a free port>";
  }
  lines.push_back(fmt::format("  workers (node {}): {}", o.node_rank, fmt::join(argv, " ")));
  return lines;
}

}  // namespace acspeed::tuner
