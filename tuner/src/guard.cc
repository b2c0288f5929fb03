#include "guard.h"

#include <algorithm>

#include <fmt/format.h>

#include "acspeed/comm_methods.h"
#include "acspeed/error.h"
#include "acspeed/tuner/convergence_guard.h"
#include "acspeed/tuner/inflation.h"
#include "acspeed/tuner/statistics.h"
#include "decision_evidence.h"

namespace acspeed::tuner {
namespace {

// A window and a trajectory (or a trajectory whose loss became NaN/Inf) that cover the numerics.
bool has_window(const TrialMetrics& m) {
  const bool trajectory = !m.trajectory.empty() || m.trajectory_finite == false;
  return m.fidelity_cosine && m.fidelity_norm_error && trajectory;
}

// The window and trajectory `metrics` reuses from trial `ordinal`'s.
void carry(TrialMetrics& metrics, int64_t ordinal, const TrialMetrics& w) {
  metrics.fidelity_cosine = w.fidelity_cosine;
  metrics.fidelity_norm_error = w.fidelity_norm_error;
  metrics.fidelity_step_cosine_min = w.fidelity_step_cosine_min;
  metrics.fidelity_steps = w.fidelity_steps;
  metrics.fidelity_trial = w.fidelity_trial.value_or(ordinal);
  metrics.trajectory = w.trajectory;
  metrics.trajectory_finite = w.trajectory_finite;
  metrics.trajectory_trial = w.trajectory_trial.value_or(ordinal);
}

bool rejected(const TrialMetrics& m) { return m.guard.is_object() && m.guard.value("passed", true) == false; }

}  // namespace

GuardOptions guard_options(const TuneOptions& o) {
  GuardOptions g;
  g.active = std::any_of(o.space.compression.begin(), o.space.compression.end(),
                         [](Compression c) { return info(c).changes_numerics; });
  g.trajectory_steps = o.trajectory_steps;
  g.seed = o.seed;
  g.data = guard_data(o);
  return g;
}

std::string numerics_key(const CommConfig& config) {
  std::string key(to_string(config.compression));
  if (info(config.compression).ranked) key += fmt::format(" rank {} start {}", config.powersgd_rank, config.powersgd_start_step);
  if (info(config.algorithm).by_node) key += fmt::format(" {}", to_string(config.algorithm));
  return key;
}

const Measured* best_exact(const std::vector<Measured>& search) {
  const Measured* best = nullptr;
  for (const auto& m : search) {
    if (!changes_numerics(m.config) && m.ranking_cost < kFailedCost && (best == nullptr || m.ranking_cost < best->ranking_cost)) {
      best = &m;
    }
  }
  return best;
}

ConvergenceGuard::ConvergenceGuard(GuardOptions options, Note note) : o_(std::move(options)), note_(std::move(note)) {}

std::optional<ReferenceRun> ConvergenceGuard::reference_to_run(const std::vector<Measured>& search,
                                                                const SearchSpace& space) {
  if (!o_.active) return std::nullopt;
  for (const auto& m : search) {  // a resumed session's uncompressed trajectory, when it stored one
    if (!changes_numerics(m.config) && m.ranking_cost < kFailedCost && !m.metrics.trajectory.empty()) {
      reference_ = m.metrics;
      return std::nullopt;
    }
  }
  // The search's start when it is uncompressed and not measured yet (then it counts as a search
  // trial), else DDP's defaults; either way with the uncompressed trajectory.
  const CommConfig start = space.config_at(space.default_point());
  ReferenceRun run;
  run.search = !changes_numerics(start) && std::none_of(search.begin(), search.end(), [&](const Measured& m) {
    return m.config == start;
  });
  run.config = run.search ? start : CommConfig{};
  if (run.search) run.candidate_index = space.ordinal_of(space.default_point());
  run.label = run.search ? run.config.describe()
                         : fmt::format("{} (the convergence guard's uncompressed reference)", run.config.describe());
  reference_pending_ = true;
  return run;
}

void ConvergenceGuard::reference_measured(const Measured& m) {
  reference_pending_ = false;
  if (m.step_s == kFailedCost || m.metrics.trajectory.empty()) {
    ACS_THROW(Error, "the uncompressed reference run for the convergence guard failed ({}): compressed configs "
                     "cannot be judged",
              m.error.empty() ? (m.metrics.trajectory_finite == false ? "a loss of its trajectory became NaN/Inf"
                                                                       : "no loss trajectory")
                              : m.error);
  }
  reference_ = m.metrics;
}

void ConvergenceGuard::resume(std::vector<Measured>& search, const std::vector<PairTrial>& pairs) {
  for (auto& m : search) judge(m);  // against this session's reference
  for (const auto& m : search) keep_window(m);
  for (const auto& p : pairs) keep_window(p.run);
}

GuardPlan ConvergenceGuard::before(const CommConfig& config, TrialMode mode, bool search) const {
  GuardPlan plan;
  plan.judged = search;
  if (mode == TrialMode::kDdp && changes_numerics(config)) {
    const auto window = windows_.find(numerics_key(config));
    if (window == windows_.end()) {
      plan.fidelity_steps = kFidelitySteps;
      plan.trajectory_steps = o_.trajectory_steps;
    } else {
      plan.window = window->first;
      // Rejected on the window and trajectory this trial would reuse, and the guard judges nothing
      // else: the verdict cannot differ, so the trial is not run.
      plan.skip = search && rejected(window->second.metrics);
    }
  }
  if (reference_pending_) plan.trajectory_steps = o_.trajectory_steps;
  return plan;
}

void ConvergenceGuard::after(const GuardPlan& plan, bool ran, Measured& m) {
  if (ran) {
    if (m.metrics.fidelity_s) {
      ++cost_.windows;
      cost_.fidelity_s += *m.metrics.fidelity_s;
    }
    if (m.metrics.trajectory_s) {
      ++cost_.trajectories;
      cost_.trajectory_s += *m.metrics.trajectory_s;
    }
  }
  if (!plan.window.empty() && (ran || plan.skip)) {
    const Window& w = windows_.at(plan.window);
    carry(m.metrics, w.ordinal, w.metrics);
    if (plan.skip) {
      m.metrics.guard = w.metrics.guard;
      m.metrics.inflation = w.metrics.inflation;
      m.status = "failed";
      m.step_s = m.ranking_cost = kFailedCost;
      m.error = fmt::format("convergence guard: {} (the verdict on trial {}'s window and trajectory, the same "
                            "numerics; not run)",
                            w.metrics.guard.value("reason", std::string("rejected")),
                            m.metrics.fidelity_trial.value_or(w.ordinal));
    }
  }
  if (!plan.judged) return;
  judge(m);  // before it is stored: the verdict is part of the trial
  keep_window(m);
}

void ConvergenceGuard::keep_window(const Measured& m) {
  if (changes_numerics(m.config) && has_window(m.metrics)) windows_.try_emplace(numerics_key(m.config), Window{m.ordinal, m.metrics});
}

void ConvergenceGuard::judge(Measured& m) const {
  if (!changes_numerics(m.config) || m.step_s == kFailedCost || !reference_) return;
  GuardVerdict verdict = judge_convergence(m.metrics, *reference_);
  InflationOptions inflation_options;
  inflation_options.seed = o_.seed;
  const Inflation inflation = measure_inflation(m.metrics.trajectory, reference_->trajectory, inflation_options);
  m.metrics.inflation = inflation;
  verdict.evidence["data"] = o_.data;
  verdict.evidence["trajectory_steps"] = static_cast<int>(m.metrics.trajectory.size());
  m.metrics.guard = verdict.evidence;
  if (!verdict.passed) {
    m.ranking_cost = kFailedCost;
    m.status = "failed";
    m.error = "convergence guard: " + verdict.reason;
    note_(fmt::format("  {} rejected by the convergence guard: {}", m.config.describe(), verdict.reason));
  } else if (!inflation.finite_upper()) {
    // Not ranked: nothing bounds how many more steps it needs (decision_rule.h).
    m.ranking_cost = kFailedCost;
    note_(fmt::format("  {} not chosen: its step inflation {}", m.config.describe(),
                      inflation.kind == InflationKind::kMeasured ? inflation.describe() + " has no upper bound"
                                                                 : "is " + inflation.describe()));
  } else {
    // Ranked by p50 x the upper end of its inflation (decision_rule.h).
    m.ranking_cost = m.metrics.p50_s * inflation.high;
  }
}

std::optional<std::string> ConvergenceGuard::cost_note(double session_s) const {
  const Cost& g = cost_;
  if (g.windows == 0 && g.trajectories == 0) return std::nullopt;
  return fmt::format("convergence guard: {} gradient-fidelity window(s) of {} steps ({:.0f} s) and {} loss "
                     "trajectories of {} steps ({:.0f} s): {:.0f} s of the session's {:.0f} s so far",
                     g.windows, kFidelitySteps, g.fidelity_s, g.trajectories, o_.trajectory_steps, g.trajectory_s,
                     g.fidelity_s + g.trajectory_s, session_s);
}

CandidateEvidence ConvergenceGuard::evidence_for(const Measured& candidate, const std::vector<Measured>& search) const {
  CandidateEvidence e;
  if (!changes_numerics(candidate.config)) return e;
  e.inflation = candidate.metrics.inflation.value_or(Inflation{});
  const auto defaults = std::find_if(search.begin(), search.end(), [](const Measured& m) { return m.config == CommConfig{}; });
  const Measured* exact = best_exact(search);
  if (defaults != search.end() && exact != nullptr && defaults->ranking_cost < kFailedCost) {
    e.bar = std::max(1.0, defaults->ranking_cost / exact->ranking_cost);
  }
  return e;
}

std::string ConvergenceGuard::fastest_step_note(const Measured& best, const std::vector<Measured>& search) const {
  const Measured* fastest = nullptr;
  for (const auto& m : search) {
    if (m.status == "ok" && (fastest == nullptr || m.metrics.p50_s < fastest->metrics.p50_s)) fastest = &m;
  }
  if (fastest == nullptr || !changes_numerics(fastest->config) || fastest->config == best.config ||
      !fastest->metrics.inflation) {
    return "";
  }
  return fmt::format("; the fastest step, {} ({}), was ranked {}: its step inflation is {}", fastest->config.describe(),
                     format_seconds(fastest->metrics.p50_s), fastest->ranking_cost < kFailedCost ? "lower" : "out",
                     fastest->metrics.inflation->describe());
}

}  // namespace acspeed::tuner
