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

// Rejected on its evidence: failed, and not undecided (more steps would not change it).
bool rejected(const TrialMetrics& m) {
  return m.guard.is_object() && m.guard.value("passed", true) == false && !m.guard.contains("undecided");
}

// Why a verdict that failed on its loss check alone, within that check's noise, is undecided; ""
// when it is not such a verdict.
std::string loss_undecided_why(const GuardVerdict& v) {
  if (!v.loss_undecided) return "";
  const auto& loss = v.evidence.at("loss");
  return fmt::format("its loss check failed within noise: {} (the tails' difference has a noise of {:.3g}, the "
                     "excess over the allowance is within {:g}x that)",
                     v.reason, loss.value("noise", 0.0), loss.value("undecided_z", 0.0));
}

// A near-exact numerics whose trajectories agree with its fidelity bound (inflation.h): each of its
// updates is within e of the uncompressed one, and its trajectories' own inflation interval includes
// 1. A loss check that fails it compares two runs that SGD drives apart from any difference, a
// rounding's included; the tails' gap is that divergence, which one pair of runs cannot tell from a
// lag, while the inflation, estimated over the whole trajectory, shows none. Its failure is overruled
// (recorded in the loss check's evidence, "overruled"); returns why, in words.
std::string overrule_loss_check(GuardVerdict& v, double error, const Inflation& trajectories) {
  std::string why = fmt::format("every step's gradient within {:.2g} of the exact one and the trajectories' "
                                "inflation {} includes 1, so the tails' gap is the two runs' divergence, not a lag",
                                error, trajectories.describe());
  v.evidence["loss"]["overruled"] = why;
  v.passed = true;
  v.loss_undecided = false;
  v.reason.clear();
  v.evidence["passed"] = true;
  v.evidence.erase("reason");
  return why;
}

}  // namespace

GuardOptions guard_options(const TuneOptions& o) {
  GuardOptions g;
  g.active = std::any_of(o.space.compression.begin(), o.space.compression.end(),
                         [](Compression c) { return info(c).changes_numerics; });
  g.trajectory_steps = o.trajectory_steps;
  g.trajectory_cap = o.trajectory_steps * kTrajectoryCapFactor;
  g.seed = o.seed;
  g.data = guard_data(o);
  g.ranks_per_node = o.nproc_per_node;
  return g;
}

std::string numerics_key(const CommConfig& config, int ranks_per_node) {
  std::string key(to_string(config.compression));
  if (info(config.compression).ranked) key += fmt::format(" rank {} start {}", config.powersgd_rank, config.powersgd_start_step);
  if (!reduces_as_flat(config.algorithm, ranks_per_node)) key += fmt::format(" {}", to_string(config.algorithm));
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

std::optional<GuardRun> ConvergenceGuard::reference_to_run(const std::vector<Measured>& search,
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
  GuardRun run;
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
  for (const auto& m : search) {
    if (!changes_numerics(m.config) && m.ranking_cost < kFailedCost && (best_exact_s_ == 0 || m.step_s < best_exact_s_)) {
      best_exact_s_ = m.step_s;
    }
  }
  for (auto& m : search) judge(m);  // against this session's reference
  for (const auto& m : search) keep_window(m);
  for (const auto& p : pairs) keep_window(p.run);
}

std::vector<Point> ConvergenceGuard::first_points(const SearchSpace& space) const {
  const auto& names = SearchSpace::knob_names();
  const auto knob = [&names](const char* name) {
    return static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
  };
  const size_t compression = knob("compression"), rank = knob("powersgd_rank");
  std::vector<std::pair<int, Point>> families;  // (order, point): casts first, then PowerSGD from the highest rank
  const Point start = space.default_point();
  for (size_t c = 0; c < space.compression.size(); ++c) {
    if (!info(space.compression[c]).changes_numerics) continue;
    for (size_t r = 0; r < (info(space.compression[c]).ranked ? space.powersgd_ranks.size() : 1); ++r) {
      Point point = start;
      point[compression] = c;
      if (info(space.compression[c]).ranked) point[rank] = r;
      if (windows_.count(key_of(space.config_at(point))) > 0) continue;
      const int order = info(space.compression[c]).ranked ? kMaxPowerSgdRank + 1 - space.powersgd_ranks[r] : 0;
      families.emplace_back(order, point);
    }
  }
  std::stable_sort(families.begin(), families.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Point> points;
  for (auto& family : families) points.push_back(std::move(family.second));
  return points;
}

double ConvergenceGuard::ranking_factor(const CommConfig& config) const {
  if (!changes_numerics(config)) return 1;
  const auto window = windows_.find(key_of(config));
  if (window == windows_.end()) return 1;
  const TrialMetrics& m = window->second.metrics;
  if (rejected(m)) return kFailedCost;
  if (!m.inflation) return 1;
  return m.inflation->finite_upper() ? m.inflation->high : kFailedCost;
}

GuardPlan ConvergenceGuard::before(const CommConfig& config, TrialMode mode, bool search) const {
  GuardPlan plan;
  if (extending_) {  // the run extension() asked for: its trajectory only, judged in after()
    plan.extension = true;
    plan.trajectory_steps = pending_->steps;
    if (extending_numerics_) plan.window = pending_->numerics;
    return plan;
  }
  plan.judged = search;
  if (mode == TrialMode::kDdp && changes_numerics(config)) {
    const auto window = windows_.find(key_of(config));
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

double ConvergenceGuard::expected_s(const GuardPlan& plan) const {
  if (!reference_ || reference_->trajectory.empty() || plan.skip) return 0;
  const double per_step = reference_->trajectory_s.value_or(0) / static_cast<double>(reference_->trajectory.size());
  return per_step * (plan.fidelity_steps + plan.trajectory_steps);
}

void ConvergenceGuard::after(const GuardPlan& plan, bool ran, Measured& m) {
  if (ran) {
    if (m.metrics.fidelity_s) {
      ++cost_.windows;
      cost_.fidelity_s += *m.metrics.fidelity_s;
    }
    if (m.metrics.trajectory_s) {
      ++cost_.trajectories;
      if (plan.extension) ++cost_.extended;
      cost_.trajectory_s += *m.metrics.trajectory_s;
    }
  }
  if (plan.extension) {
    extended(plan, ran, m);
    return;
  }
  if (!plan.window.empty() && (ran || plan.skip)) {
    const Window& w = windows_.at(plan.window);
    carry(m.metrics, w.ordinal, w.metrics);
    if (plan.skip) {
      m.metrics.guard = w.metrics.guard;
      m.metrics.inflation = w.metrics.inflation;
      m.status = TrialStatus::kFailed;
      m.step_s = m.ranking_cost = kFailedCost;
      m.error = fmt::format("convergence guard: {} (the verdict on trial {}'s window and trajectory, the same "
                            "numerics; not run)",
                            w.metrics.guard.value("reason", std::string("rejected")),
                            m.metrics.fidelity_trial.value_or(w.ordinal));
    }
  }
  if (!plan.judged) return;
  if (!changes_numerics(m.config) && m.ranking_cost < kFailedCost && (best_exact_s_ == 0 || m.step_s < best_exact_s_)) {
    best_exact_s_ = m.step_s;
  }
  judge(m);  // before it is stored: the verdict is part of the trial
  keep_window(m);
}

void ConvergenceGuard::extended(const GuardPlan& plan, bool ran, Measured& m) {
  extending_ = false;
  const int steps = pending_->steps;
  const bool got = ran && static_cast<int>(m.metrics.trajectory.size()) >= steps;
  if (!got) {
    decline(fmt::format("its extension run (trial {}) gave no {}-step trajectory{}", m.ordinal, steps,
                        m.error.empty() ? "" : ": " + m.error));
    return;
  }
  if (plan.window.empty()) {  // the reference's: the numerics' run is next
    reference_->trajectory = m.metrics.trajectory;
    return;
  }
  Window& w = windows_.at(plan.window);
  w.metrics.trajectory = m.metrics.trajectory;
  w.metrics.trajectory_finite = m.metrics.trajectory_finite;
  w.metrics.trajectory_trial = m.ordinal;
  Extension done = *pending_;
  if (const auto before = extended_.find(plan.window); before != extended_.end()) {
    done.from = before->second.from;  // the first length, and why it was first extended
    done.why = before->second.why;
  }
  extended_[plan.window] = done;
  pending_.reset();
  rejudge_ = plan.window;
  // The run itself is stored with the verdict on the extended trajectories.
  carry(m.metrics, w.ordinal, w.metrics);
  m.metrics.trajectory_trial.reset();  // its own
  judge(m);
  w.metrics.guard = m.metrics.guard;
  w.metrics.inflation = m.metrics.inflation;
}

std::optional<GuardRun> ConvergenceGuard::extension(std::vector<Measured>& search) {
  if (rejudge_) {
    const std::string key = *rejudge_;
    rejudge_.reset();
    const Window& w = windows_.at(key);
    for (auto& m : search) {
      if (!changes_numerics(m.config) || key_of(m.config) != key || m.step_s == kFailedCost) continue;
      carry(m.metrics, w.ordinal, w.metrics);
      if (m.ordinal == w.ordinal) m.metrics.fidelity_trial.reset();  // the window is its own
      m.ranking_cost = m.step_s;
      judge(m);
    }
  }
  if (!pending_) return std::nullopt;
  const int steps = pending_->steps;
  GuardRun run;
  extending_ = true;
  extending_numerics_ = static_cast<int>(reference_->trajectory.size()) >= steps;
  const Window& w = windows_.at(pending_->numerics);
  const double numerics_s =
      w.metrics.trajectory_s.value_or(0) * steps / std::max<size_t>(1, w.metrics.trajectory.size());
  if (!extending_numerics_) {
    run.config = CommConfig{};
    run.label = fmt::format("DDP defaults (the convergence guard's reference, trajectory extended to {} steps)", steps);
    run.expected_s = reference_->trajectory_s.value_or(0) * steps / std::max<size_t>(1, reference_->trajectory.size()) +
                     numerics_s;
    return run;
  }
  run.config = w.config;
  run.search = true;
  run.label = fmt::format("{} (the convergence guard: trajectory extended to {} steps)", w.config.describe(), steps);
  run.expected_s = numerics_s;
  return run;
}

void ConvergenceGuard::decline(const std::string& why) {
  if (!pending_) return;
  extending_ = false;
  Extension declined = *pending_;
  declined.declined = why;
  if (const auto before = extended_.find(declined.numerics); before != extended_.end()) {
    declined.from = before->second.from;
    declined.steps = before->second.steps;
    declined.why = before->second.why;
  } else {
    declined.steps = declined.from;
  }
  extended_[declined.numerics] = declined;
  rejudge_ = declined.numerics;
  pending_.reset();
  note_(fmt::format("  convergence guard: the trajectories of {} are not extended: {}", declined.numerics, why));
}

// Why the verdict on `m` is undecided, "" when it is decided: it passed, and the step speedup over
// the reference clears the bar divided by the least inflation its interval allows (its lower end,
// not below 1: guard.h) but not divided by the interval's upper end.
std::string ConvergenceGuard::undecided_why(const TrialMetrics& m) const {
  if (!reference_ || !m.inflation || m.inflation->kind != InflationKind::kMeasured || m.p50_s <= 0 ||
      m.guard.value("passed", false) != true) {
    return "";
  }
  const double speedup = reference_->p50_s / m.p50_s;
  const double bar = best_exact_s_ > 0 ? std::max(1.0, reference_->p50_s / best_exact_s_) : 1.0;
  const Inflation& i = *m.inflation;
  const double least = std::max(1.0, i.low);
  if (!(speedup / least > bar) || speedup / i.high > bar) return "";
  return fmt::format("step speedup {:.2f}x over the reference, inflation {}: {:.2f}x effective at the least "
                     "inflation the interval allows ({:.2f}: its lower end, no lower than 1), {:.2f}x at its upper "
                     "end, against the search's bar of {:.2f}",
                     speedup, i.describe(), speedup / least, least, speedup / i.high, bar);
}

void ConvergenceGuard::keep_window(const Measured& m) {
  if (changes_numerics(m.config) && has_window(m.metrics)) {
    windows_.try_emplace(key_of(m.config), Window{m.ordinal, m.metrics, m.config});
  }
}

void ConvergenceGuard::judge(Measured& m) {
  if (!changes_numerics(m.config) || m.step_s == kFailedCost || !reference_) return;
  GuardVerdict verdict = judge_convergence(m.metrics, *reference_);
  InflationOptions inflation_options;
  inflation_options.seed = o_.seed;
  Inflation inflation = measure_inflation(m.metrics.trajectory, reference_->trajectory, inflation_options);
  // A near-exact numerics (inflation.h): its fidelity window bounds the inflation far tighter than
  // the trajectories can, where they do not contradict it; theirs is kept beside it.
  if (const auto error = near_exact_error(m.metrics.fidelity_step_cosine_min, m.metrics.fidelity_norm_error)) {
    if (auto bounded = near_exact_inflation(*error, inflation)) {
      verdict.evidence["trajectory_inflation"] = inflation;
      if (verdict.loss_only) {
        const std::string failed = verdict.reason;
        const std::string why = overrule_loss_check(verdict, *error, inflation);
        note_(fmt::format("  {}: its loss check failed ({}), overruled: {}", m.config.describe(), failed, why));
      }
      inflation = *bounded;
    }
  }
  m.metrics.inflation = inflation;
  verdict.evidence["data"] = o_.data;
  verdict.evidence["trajectory_steps"] = static_cast<int>(m.metrics.trajectory.size());
  const std::string key = key_of(m.config);
  const auto e = extended_.find(key);
  const bool declined = e != extended_.end() && !e->second.declined.empty();
  if (e != extended_.end()) {
    verdict.evidence["extended"] = {{"from_steps", e->second.from}, {"to_steps", e->second.steps}, {"why", e->second.why}};
    if (declined) verdict.evidence["extended"]["declined"] = e->second.declined;
  }
  m.metrics.guard = verdict.evidence;
  const int steps = static_cast<int>(m.metrics.trajectory.size());
  // A loss check failed within its noise is undecided while longer trajectories can be had; at the
  // cap, or when the budget declined them, the failure stands.
  const std::string undecided = verdict.passed ? undecided_why(m.metrics)
                                : !declined && steps < o_.trajectory_cap ? loss_undecided_why(verdict)
                                                                         : "";
  if (!undecided.empty()) m.metrics.guard["undecided"] = undecided;
  if (!verdict.passed && undecided.empty()) {
    m.ranking_cost = kFailedCost;
    m.status = TrialStatus::kFailed;
    m.error = "convergence guard: " + verdict.reason;
    note_(fmt::format("  {} rejected by the convergence guard: {}", m.config.describe(), verdict.reason));
  } else if (!undecided.empty()) {
    // Not ranked until more evidence decides it; never chosen while undecided.
    m.ranking_cost = kFailedCost;
    if (!pending_ && !declined && steps < o_.trajectory_cap) {
      pending_ = Extension{key, steps, std::min(o_.trajectory_cap, 2 * steps), undecided, ""};
      note_(fmt::format("  {}: the convergence guard cannot decide on {} steps ({}): its trajectories are extended "
                        "to {} steps",
                        m.config.describe(), steps, undecided, pending_->steps));
    } else if (pending_ == std::nullopt || pending_->numerics != key) {
      note_(fmt::format("  {} not chosen: the convergence guard's verdict is undecided on {} steps ({})",
                        m.config.describe(), steps, undecided));
    }
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
                     "trajectories of {} steps{} ({:.0f} s): {:.0f} s of the session's {:.0f} s so far",
                     g.windows, kFidelitySteps, g.fidelity_s, g.trajectories, o_.trajectory_steps,
                     g.extended > 0 ? fmt::format(", {} of them extended to {}", g.extended, o_.trajectory_cap) : "",
                     g.trajectory_s, g.fidelity_s + g.trajectory_s, session_s);
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

const Measured* ConvergenceGuard::fallback(const std::vector<CommConfig>& rejected,
                                           const std::vector<Measured>& search) const {
  const Measured* best = nullptr;
  for (const auto& m : search) {
    const bool tried = std::any_of(rejected.begin(), rejected.end(), [this, &m](const CommConfig& c) {
      return key_of(c) == key_of(m.config);
    });
    if (m.ranking_cost == kFailedCost || tried) continue;
    if (best == nullptr || m.ranking_cost < best->ranking_cost) best = &m;
  }
  return best;
}

std::string ConvergenceGuard::fastest_step_note(const Measured& best, const std::vector<Measured>& search) const {
  const Measured* fastest = nullptr;
  for (const auto& m : search) {
    if (m.status == TrialStatus::kOk && (fastest == nullptr || m.metrics.p50_s < fastest->metrics.p50_s)) fastest = &m;
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
