#include "acspeed/tuner/session.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "acspeed/comm_methods.h"
#include "acspeed/error.h"
#include "acspeed/fingerprint.h"
#include "acspeed/process/signals.h"
#include "acspeed/tuner/nccl_net.h"
#include "acspeed/tuner/statistics.h"
#include "acspeed/tuner/strategy.h"
#include "calibration.h"
#include "compression_hint.h"
#include "decision_evidence.h"
#include "decision_rule.h"
#include "guard.h"
#include "plan.h"
#include "resume.h"
#include "session_record.h"
#include "trial_runner.h"
#include "worker_launch.h"

namespace acspeed::tuner {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

class Session {
 public:
  Session(const TuneOptions& options, Store& store, SessionObserver& observer)
      : o_(options), store_(store), observer_(observer),
        guard_(guard_options(options), [this](const std::string& line) { observer_.note(line); }) {}
  SessionResult run();

 private:
  void open_session();
  Measured run_trial(const CommConfig& config, TrialRole role, std::optional<int> pair,
                     std::optional<size_t> candidate_index, const std::string& label,
                     TrialMode mode = TrialMode::kDdp);
  void calibrate_model();
  void remember(TrialRole role, const CommConfig& config, const TrialMetrics& metrics);
  std::optional<double> bound_of(const CommConfig& config) const;
  bool search_allows(int trials_ahead) const;
  bool guard_allows(double ahead_s) const;
  std::string guard_budget_text() const;
  const Measured* find(const CommConfig& config) const;
  const Measured* best() const;
  std::vector<PairRun> run_pairs(const CommConfig& candidate, int done, std::string& stopped_because);
  Verdict confirm(const CommConfig& candidate, CandidateEvidence evidence, std::vector<PairRun>& pairs,
                  std::string& stopped_because);
  std::optional<double> bar_in_pairs(double search_bar);
  void search();
  bool measure(const Point& point, bool required = false);
  void extend_guard();
  void report_search() const;
  void hint_compression() const;
  void start_guard();
  void read_nccl_net();
  void decide();

  const TuneOptions& o_;
  Store& store_;
  SessionObserver& observer_;
  std::unique_ptr<WorkerGroup> workers_;
  std::string work_dir_;
  std::string strategy_name_;
  WorkerHello hello_;
  Fingerprint fp_;
  int64_t session_id_ = 0;
  int64_t next_ordinal_ = 0;
  int trials_run_ = 0;
  int planned_ = 0;
  // The best exact config's own pairs, run where a compressed candidate's bar was in question (bar_in_pairs).
  struct ExactPairs {
    CommConfig config;
    std::vector<PairRun> pairs;
    std::string stopped_because;
    Verdict verdict;
    double search_bar = 1;
  };
  std::optional<ExactPairs> exact_pairs_;
  bool any_failed_ = false;
  Clock::time_point started_ = Clock::now();
  std::vector<double> trial_walls_;  // DDP trials' walls less their guard work: what a pair trial costs
  int next_pair_ = 0;  // the index of the session's next decision pair (a resumed session's stored ones first)
  double guard_s_ = 0;  // the guard's evidence so far: windows and trajectories, and its extension runs whole
  std::vector<Measured> measured_;  // search results in the order measured (resumed ones first)
  // A resumed session's decision-pair trials (role candidate|baseline), in the order stored.
  std::vector<PairTrial> stored_pair_trials_;
  std::vector<ModelTrial> model_trials_;  // every ok trial, for the step model
  StepModel model_;
  ConvergenceGuard guard_;
  bool nccl_net_logged_ = false;       // the workers' NCCL writes its INIT/NET lines to kNcclNetLog files
  std::optional<NcclNet> nccl_net_seen_;  // NCCL's net as its INFO line says (nccl_net.h)
};

void Session::remember(TrialRole role, const CommConfig& config, const TrialMetrics& metrics) {
  model_trials_.push_back({role, config, metrics});
  model_ = calibrate(model_trials_, model_setup(hello_));
}

std::optional<double> Session::bound_of(const CommConfig& config) const {
  const Prediction p = predict(model_, config);
  return p.ok ? std::optional<double>(p.bound_s) : std::nullopt;
}

// The step model's own trials (calibration.h).
void Session::calibrate_model() {
  const CalibrationPlan plan = calibration_plan(hello_, model_trials_);
  if (!plan.skipped.empty()) {
    observer_.note(plan.skipped);
    return;
  }
  for (const auto& trial : plan.trials) {
    run_trial(CommConfig{}, trial.role, std::nullopt, std::nullopt, trial.label, trial.mode);
  }
  observer_.note(calibration_note(model_));
}

const Measured* Session::find(const CommConfig& config) const {
  const auto it = std::find_if(measured_.begin(), measured_.end(), [&](const Measured& m) { return m.config == config; });
  return it == measured_.end() ? nullptr : &*it;
}

// The fastest search result; the first measured among equals.
const Measured* Session::best() const {
  const Measured* best = nullptr;
  for (const auto& m : measured_) {
    if (m.ranking_cost < kFailedCost && (best == nullptr || m.ranking_cost < best->ranking_cost)) best = &m;
  }
  return best;
}

void Session::open_session() {
  if (o_.resume) {
    ResumedSession resumed = resume_session(store_, *o_.resume, hello_, [this](const std::string& line) {
      observer_.note(line);
    });
    session_id_ = resumed.session_id;
    next_ordinal_ = resumed.next_ordinal;
    model_trials_ = std::move(resumed.model_trials);
    measured_ = std::move(resumed.search);
    stored_pair_trials_ = std::move(resumed.pair_trials);
    model_ = calibrate(model_trials_, model_setup(hello_));
    return;
  }
  session_id_ = store_.create_session(new_session_record(o_, hello_, fp_, strategy_name_));
}

// The search's and the decision's budget: time so far without the guard's evidence, and `trials_ahead`
// more trials at what one costs without it.
bool Session::search_allows(int trials_ahead) const {
  if (o_.budget_minutes <= 0 || trial_walls_.empty()) return true;
  const double elapsed = std::chrono::duration<double>(Clock::now() - started_).count() - guard_s_;
  return elapsed + median(trial_walls_) * trials_ahead <= o_.budget_minutes * 60.0;
}

// The guard's own budget (guard_budget_minutes): its evidence so far and `ahead_s` more.
// Nothing more to measure (ahead_s 0) needs no room in it.
bool Session::guard_allows(double ahead_s) const {
  if (o_.budget_minutes <= 0 || ahead_s <= 0) return true;
  return guard_s_ + ahead_s <= guard_budget_minutes(o_) * 60.0;
}

// What a decline or a stop names the guard's budget by.
std::string Session::guard_budget_text() const {
  return fmt::format("the convergence guard's time budget of {:g} min", guard_budget_minutes(o_));
}

Measured Session::run_trial(const CommConfig& config, TrialRole role, std::optional<int> pair,
                            std::optional<size_t> candidate_index, const std::string& label, TrialMode mode) {
  TrialRecord record;
  record.session_id = session_id_;
  record.ordinal = next_ordinal_++;
  record.role = role;
  record.config_json = config_to_json(config);
  record.started_at = utc_now();
  observer_.trial_started(trials_run_, planned_, label);

  const GuardPlan plan = guard_.before(config, mode, role == TrialRole::kSearch);
  TrialRequest request{record.ordinal, config, o_.warmup, o_.steps, mode, plan.fidelity_steps, plan.trajectory_steps};
  Measured m;
  m.ordinal = record.ordinal;
  m.config = config;
  bool node_lost = false, ran = false;
  if (!plan.skip) {
    const TrialOutcome outcome = workers_->run(request, std::chrono::seconds(o_.trial_timeout_s));
    node_lost = outcome.node_lost;
    m.status = outcome.status;
    m.error = outcome.error;
    ran = outcome.status == TrialStatus::kOk;
    if (ran) {
      record.step_times_s = outcome.reply.step_times_s;
      m.step_times_s = record.step_times_s;
      m.metrics = with_measurements(metrics_from_steps(record.step_times_s, o_.batch_size, o_.warmup), outcome.reply);
      if (mode == TrialMode::kComputeOnly && !hello_.gradients.empty()) m.metrics.gradients = hello_.gradients;
      m.step_s = m.metrics.p50_s;
      if (m.metrics.finite != true) {
        m.status = TrialStatus::kFailed;
        m.error = "a loss became NaN/Inf during the trial";
        m.step_s = kFailedCost;
      }
      read_nccl_net();
    }
    const double guard_s = plan.extension ? outcome.wall_s
                                          : m.metrics.fidelity_s.value_or(0) + m.metrics.trajectory_s.value_or(0);
    guard_s_ += guard_s;
    if (!plan.extension && mode == TrialMode::kDdp) trial_walls_.push_back(std::max(0.0, outcome.wall_s - guard_s));
  }
  record.finished_at = utc_now();
  ++trials_run_;
  m.ranking_cost = m.step_s;
  m.metrics.pair = pair;
  if (candidate_index) m.metrics.candidate_index = static_cast<int>(*candidate_index);
  guard_.after(plan, ran, m);
  record.status = m.status;
  record.error = m.error;
  record.metrics_json = metrics_to_json(m.metrics);
  store_.add_trial(record);  // written as it happens: a killed tuner loses no completed trial
  if (m.status != TrialStatus::kOk) any_failed_ = true;

  if (m.status == TrialStatus::kOk) remember(role, config, m.metrics);
  TrialEvent event{record.ordinal, role, label, m.status, m.error, m.metrics};
  if (m.status == TrialStatus::kOk && mode != TrialMode::kComputeOnly) {
    const Prediction p = predict(model_, config);
    if (p.ok) {
      event.bound_s = p.bound_s;
      event.predicted_s = p.step_s;
    }
  }
  const Measured* fastest = best();
  if (role == TrialRole::kSearch && m.ranking_cost < kFailedCost && (fastest == nullptr || m.ranking_cost < fastest->ranking_cost)) {
    fastest = &m;
  }
  if (fastest != nullptr) {
    event.best_config = fastest->config;
    event.best_cost_s = fastest->ranking_cost;
  }
  observer_.trial_finished(event);
  // The trial is stored with the reason; without that node no later trial can run.
  if (node_lost) ACS_THROW(Error, "{}; the session ends here", m.error);
  return m;
}

// After a trial that ran (its communicators exist): NCCL's net from its INFO line, once; where it
// and the plan's view disagree the line wins (nccl_net.h; decide() applies it).
void Session::read_nccl_net() {
  if (!nccl_net_logged_ || nccl_net_seen_) return;
  nccl_net_seen_ = nccl_net_from_logs(work_dir_, kNcclNetLog);
  if (nccl_net_seen_) observer_.note(nccl_net_note(o_.nccl_net, *nccl_net_seen_));
}

// The convergence guard's reference run (a search trial when it is the search's start), and the
// resumed trials judged against it.
void Session::start_guard() {
  if (const auto reference = guard_.reference_to_run(measured_, o_.space)) {
    Measured m = run_trial(reference->config, reference->search ? TrialRole::kSearch : TrialRole::kBaseline, std::nullopt,
                           reference->candidate_index, reference->label);
    guard_.reference_measured(m);
    if (reference->search) measured_.push_back(std::move(m));
  }
  guard_.resume(measured_, stored_pair_trials_);
  extend_guard();
}

// The guard's runs that extend an undecided verdict's trajectories, while its budget allows them (a
// run costs a trial's time without the guard's work besides the trajectories it extends).
void Session::extend_guard() {
  while (const auto run = guard_.extension(measured_)) {
    if (!guard_allows((trial_walls_.empty() ? 0 : median(trial_walls_)) + run->expected_s)) {
      guard_.decline(guard_budget_text());
      continue;
    }
    run_trial(run->config, run->search ? TrialRole::kSearch : TrialRole::kBaseline, std::nullopt, std::nullopt, run->label);
  }
}

// Measures search point `point`; false when a budget ends the search first. A `required` point
// (the guard's first points: one measured trial per numerics family asked for) runs whatever the
// budgets say.
bool Session::measure(const Point& point, bool required) {
  const CommConfig config = o_.space.config_at(point);
  // Keep room for this trial and the decision's pairs, and in the guard's budget for its window and
  // trajectory; a trial the guard does not run costs nothing.
  const GuardPlan plan = guard_.before(config, TrialMode::kDdp, true);
  if (!required && trials_run_ > 0 && !plan.skip) {
    std::string spent;
    if (!search_allows(1 + 2 * o_.repeats)) {
      spent = fmt::format("time budget of {:g} min", o_.budget_minutes);
    } else if (!guard_allows(guard_.expected_s(plan))) {
      spent = guard_budget_text();
    }
    if (!spent.empty()) {
      observer_.note(fmt::format("{}: search stopped after {} trial(s)", spent, trials_run_));
      return false;
    }
  }
  measured_.push_back(run_trial(config, TrialRole::kSearch, std::nullopt, o_.space.ordinal_of(point), config.describe()));
  extend_guard();
  return true;
}

void Session::search() {
  start_guard();
  StrategyOptions strategy_options;
  strategy_options.seed = o_.seed;
  // Forecasts of ranking costs: the step model's step and bound times what the guard knows of the
  // config's numerics (guard.h: ranking_factor), the cost its measured results are ranked by.
  strategy_options.forecast = [this, steps = model_forecast(model_, o_.space)](const Point& p) {
    std::optional<Forecast> forecast = steps(p);
    if (forecast) {
      const double factor = guard_.ranking_factor(o_.space.config_at(p));
      forecast->step_s *= factor;
      forecast->bound_s *= factor;
    }
    return forecast;
  };
  auto strategy = make_strategy(strategy_name_, o_.space, strategy_options);
  // Every numerics family asked for first (guard.h), whatever the budget, then the strategy's points
  // until the budget ends.
  for (const Point& p : guard_.first_points(o_.space)) {
    if (!find(o_.space.config_at(p))) measure(p, true);
  }
  while (auto point = strategy->next()) {
    if (const Measured* known = find(o_.space.config_at(*point))) {
      strategy->report(*point, known->ranking_cost);
      continue;
    }
    if (!measure(*point)) break;
    strategy->report(*point, measured_.back().ranking_cost);
  }
  if (const std::string summary = strategy->summary(); !summary.empty()) {
    observer_.note(fmt::format("{} strategy: {}", strategy_name_, summary));
  }
}

void Session::hint_compression() const {
  if (o_.compression_searched) return;
  // The share of the default config's step spent waiting for communication, from the probe.
  const Measured* defaults = find(o_.space.config_at(o_.space.default_point()));
  if (defaults == nullptr || defaults->step_s == kFailedCost) return;
  if (const auto hint = compression_hint(defaults->metrics, hello_.gradients)) observer_.note(*hint);
}

void Session::report_search() const {
  std::vector<SearchResult> results;
  for (const auto& m : measured_) results.push_back({m.config, m.status, m.ranking_cost, m.metrics, bound_of(m.config)});
  std::stable_sort(results.begin(), results.end(),
                   [](const SearchResult& a, const SearchResult& b) { return a.cost_s < b.cost_s; });
  observer_.search_finished(results);
}

// `candidate` alternated with DDP's defaults in o_.repeats more pairs, after the `done` it had,
// numbered on through the session (the stored pairs of a resumed session are reused); stops at the
// first failed or rejected pair.
std::vector<PairRun> Session::run_pairs(const CommConfig& candidate, int done, std::string& stopped_because) {
  const RuleOptions rule{o_.loss_tolerance, o_.seed};
  if (done == 0) {
    observer_.note(fmt::format("\nconfirming {} against DDP defaults in {} alternated pairs", candidate.describe(),
                               o_.repeats));
  }
  const CommConfig baseline;
  std::vector<PairRun> pairs;
  int reused = 0;
  for (int n = done; n < done + o_.repeats && stopped_because.empty(); ++n) {
    const int i = next_pair_++;
    const bool candidate_first = n % 2 == 0;
    Measured runs[2];  // candidate, baseline
    const bool stored = stored_pair(stored_pair_trials_, i, candidate, runs);
    if (stored) ++reused;
    for (int k = 0; k < 2 && !stored; ++k) {
      const bool is_candidate = (k == 0) == candidate_first;
      runs[is_candidate ? 0 : 1] =
          run_trial(is_candidate ? candidate : baseline, is_candidate ? TrialRole::kCandidate : TrialRole::kBaseline, i, std::nullopt,
                    fmt::format("pair {} {}", n + 1, is_candidate ? candidate.describe() : "DDP defaults"));
    }
    if (stopped_because = pair_failure(n + 1, runs[0], runs[1]); !stopped_because.empty()) break;
    PairRun pair = pair_of(candidate_first, runs[0], runs[1]);
    stopped_because = pair_rejection(candidate, pair, rule);
    pairs.push_back(std::move(pair));
  }
  if (reused > 0) observer_.note(fmt::format("  {} pair(s) stored before the interruption reused", reused));
  return pairs;
}

// `candidate`'s pairs and the verdict on them (the best exact config's reuses those bar_in_pairs ran);
// where the search's bar alone keeps a compressed candidate out (decision_rule.h: kept_out_by_bar), the
// bar measured in pairs instead; --repeats more pairs at a time while more could decide it
// (undecided_by_pairs), up to kPairsCapFactor x --repeats, within the budget.
Verdict Session::confirm(const CommConfig& candidate, CandidateEvidence evidence, std::vector<PairRun>& pairs,
                         std::string& stopped_because) {
  const RuleOptions rule{o_.loss_tolerance, o_.seed};
  if (exact_pairs_ && exact_pairs_->config == candidate) {
    pairs = exact_pairs_->pairs;
    stopped_because = exact_pairs_->stopped_because;
  } else {
    pairs = run_pairs(candidate, 0, stopped_because);
  }
  Verdict verdict = judge(candidate, pairs, stopped_because, rule, evidence);
  if (kept_out_by_bar(verdict, stopped_because)) {
    if (const auto bar = bar_in_pairs(evidence.bar)) {
      evidence.bar = *bar;
      verdict = judge(candidate, pairs, stopped_because, rule, evidence);
    }
  }
  while (undecided_by_pairs(verdict, stopped_because) && static_cast<int>(pairs.size()) < kPairsCapFactor * o_.repeats) {
    const std::string state = fmt::format("{} undecided on {} pairs ({}: the estimate at the inflation's upper end "
                                          "clears {:.3f}, the lower end does not)",
                                          candidate.describe(), pairs.size(), verdict.speedups.describe(),
                                          verdict.speedups.bar);
    if (!search_allows(2 * o_.repeats)) {
      observer_.note(fmt::format("{}: no more pairs within the time budget of {:g} min", state, o_.budget_minutes));
      break;
    }
    observer_.note(fmt::format("{}: {} more alternated pairs", state, o_.repeats));
    for (PairRun& pair : run_pairs(candidate, static_cast<int>(pairs.size()), stopped_because)) {
      pairs.push_back(std::move(pair));
    }
    verdict = judge(candidate, pairs, stopped_because, rule, evidence);
  }
  return verdict;
}

// The bar on the pairs' footing: the search's (`search_bar`) is the best exact config's step speedup
// over DDP's defaults in one trial each, that config the fastest of many noisy ones (biased up); that
// config goes to the pairs against DDP's defaults as a candidate does, once a session (its pairs stay
// for the fallback), and the bar is their step speedup's estimate, no lower than 1. nullopt where that
// config is DDP's defaults or its pairs did not all complete (the search's bar stands).
std::optional<double> Session::bar_in_pairs(double search_bar) {
  if (!exact_pairs_) {
    const Measured* exact = best_exact(measured_);
    if (exact == nullptr || exact->config.is_default()) return std::nullopt;
    observer_.note(fmt::format("the bar {:.3f}, the step speedup of {} over DDP defaults in the search (one trial "
                               "each), is measured in pairs too",
                               search_bar, exact->config.describe()));
    ExactPairs e{exact->config, {}, "", {}, search_bar};
    e.verdict = confirm(e.config, CandidateEvidence{}, e.pairs, e.stopped_because);
    exact_pairs_ = std::move(e);
  }
  if (!exact_pairs_->stopped_because.empty() || !exact_pairs_->verdict.speedup) return std::nullopt;
  return std::max(1.0, *exact_pairs_->verdict.speedup);
}

void Session::decide() {
  const Measured* fastest = best();
  if (fastest == nullptr) ACS_THROW(Error, "every search trial failed: nothing to decide (see the errors above)");
  const Measured& best = *fastest;  // the pairs below are not search results: measured_ stays as it is
  if (o_.resume) {
    // Killed after storing its decision but before closing the session: that decision stands.
    for (const auto& d : store_.decisions()) {
      if (d.session_id != session_id_) continue;
      observer_.note(fmt::format("decision {} of this session was stored before it was interrupted: {}", d.id, d.note));
      return;
    }
  }

  Decision decision = new_decision(o_, hello_, fp_, session_id_);
  json evidence = decision_evidence(o_, best, strategy_name_, measured_.size());
  const RuleOptions rule{o_.loss_tolerance, o_.seed};
  // NCCL's net as its INFO line says (else the plan's view), and the line wins: on another net than
  // Socket a sockets value changes nothing, so the candidate goes to the pairs without one.
  CommConfig candidate = best.config;
  if (o_.gpus > 0) {
    const NcclNet& net = nccl_net_seen_ ? *nccl_net_seen_ : o_.nccl_net;
    evidence["nccl_net"] = {{"socket", net.socket}, {"why", net.why}, {"from", nccl_net_seen_ ? "line" : "plan"}};
    if (nccl_net_seen_ && !net.socket && candidate.nccl_sockets) {
      observer_.note(fmt::format("NCCL sockets {} dropped from the candidate: NCCL's net is not Socket ({})",
                                 to_string(candidate.nccl_sockets), net.why));
      candidate.nccl_sockets.reset();
      evidence["candidate"] = candidate;
    }
  }

  std::vector<PairRun> pairs;
  std::string stopped_because;
  Verdict verdict;
  if (candidate.is_default()) {
    verdict = judge(candidate, pairs, stopped_because, rule, guard_.evidence_for(best, measured_));
  } else {
    verdict = confirm(candidate, guard_.evidence_for(best, measured_), pairs, stopped_because);
    evidence["pairs"] = pairs;
    evidence["loss_tolerance"] = o_.loss_tolerance;
  }
  evidence["speedups"] = verdict.speedups;
  CommConfig chosen = verdict.accepted ? candidate : CommConfig{};
  std::string note = verdict.note;
  // A compressed candidate that fails: the best certified config of another numerics goes to the
  // pairs instead (guard.h), until one is accepted or an exact one was tried.
  std::vector<CommConfig> rejected{candidate};
  const std::string compressed_note = verdict.note.substr(std::min(verdict.note.size(), verdict.note.find("candidate ")));
  for (const Measured* next = nullptr; !verdict.accepted && changes_numerics(rejected.back()) &&
                                       (next = guard_.fallback(rejected, measured_)) && !next->config.is_default();) {
    if (rejected.size() == 1) {
      evidence["compressed_candidate"] = {{"candidate", candidate}, {"pairs", pairs}, {"speedups", verdict.speedups},
                                          {"note", verdict.note}};
    }
    std::string stopped;
    verdict = confirm(next->config, guard_.evidence_for(*next, measured_), pairs, stopped);
    evidence["candidate"] = next->config;
    evidence["guard"] = next->metrics.guard;  // null for a config that changes no numerics
    evidence["pairs"] = pairs;
    evidence["speedups"] = verdict.speedups;
    note = fmt::format("{} (the compressed {})", verdict.note, compressed_note);
    chosen = verdict.accepted ? next->config : CommConfig{};
    rejected.push_back(next->config);
  }
  if (exact_pairs_) {
    const ExactPairs& e = *exact_pairs_;
    evidence["bar_in_pairs"] = {{"config", e.config}, {"search_bar", e.search_bar}, {"pairs", e.pairs},
                                {"speedups", e.verdict.speedups}, {"stopped_because", e.stopped_because}};
    const Verdict& v = e.verdict;
    note += e.stopped_because.empty() && v.speedup && v.ci_low && v.ci_high
                ? fmt::format("; the bar for a compressed config: the step speedup of {} over its own {} pairs, "
                              "{:.3f}x [{:.3f}, {:.3f}] ({:.3f} in the search)",
                              e.config.describe(), e.pairs.size(), *v.speedup, *v.ci_low, *v.ci_high, e.search_bar)
                : fmt::format("; the bar for a compressed config stayed the search's {:.3f}: the pairs of {} did not complete ({})",
                              e.search_bar, e.config.describe(), e.stopped_because);
  }
  note += guard_.fastest_step_note(best, measured_);
  decision.config = chosen;
  decision.note = note;
  decision.speedup = verdict.speedup;
  decision.ci_low = verdict.ci_low;
  decision.ci_high = verdict.ci_high;
  if (!verdict.pair_speedups.empty()) evidence["pair_speedups"] = verdict.pair_speedups;
  // How far the chosen config is from its bound (step_model.h), on its search measurement.
  const std::string bound_text = add_bound_evidence(evidence, model_, decision.config, find(decision.config));
  decision.evidence_json = evidence.dump();
  // Activated in the same transaction that stores it: whatever `configs activate` or another tuner
  // did to this key meanwhile, this session's decision is the active one when it ends.
  const int64_t id = store_.add_decision(decision, true);
  observer_.note(fmt::format("decision {} (now active for {} / {} / {} / world size {} / {} node(s)): {}{}", id,
                             decision.key.instance_type, o_.model, decision.key.precision, hello_.world_size,
                             decision.key.nnodes, decision.note, bound_text));
}

SessionResult Session::run() {
  SessionResult result;
  work_dir_ = make_work_dir();
  WorkerLaunch launch = make_launch(o_, work_dir_);
  nccl_net_logged_ = !launch.nccl_debug_file.empty();
  workers_ = std::make_unique<WorkerGroup>(std::move(launch));
  SessionStatus outcome = SessionStatus::kFailed;
  try {
    observer_.note("starting the trial workers...");
    hello_ = workers_->start();
    // The workers' node count (the key's), as the plan's was the launch's.
    strategy_name_ = resolve_strategy_name(o_.strategy, o_.space, hello_.nnodes);
    fp_ = fingerprint({JobVersions{hello_.torch_version, hello_.nccl_version, hello_.cuda_version,
                                   hello_.torch_nccl_version, hello_.torch_cuda_version}});
    store_.record_instance_type(fp_);
    observer_.note(describe_workers(hello_));
    open_session();
    observer_.note(fmt::format("session {} in {}", session_id_, store_.path()));
    planned_ = planned_search_trials(strategy_name_, o_.space) + 2 * o_.repeats;
    calibrate_model();
    search();
    report_search();
    if (auto cost = guard_.cost_note(std::chrono::duration<double>(Clock::now() - started_).count())) {
      observer_.note(*cost);
    }
    hint_compression();
    decide();
    outcome = SessionStatus::kDone;
    result.status = SessionResult::Status::kDone;
  } catch (const process::Interrupted& e) {
    outcome = SessionStatus::kInterrupted;
    result.status = SessionResult::Status::kInterrupted;
    result.signal = e.signo();
  } catch (const InvalidArgument& e) {
    result.error = e.what();
    result.usage_error = true;
  } catch (const Error& e) {
    result.error = e.what();
  }
  workers_.reset();
  if (session_id_ > 0) {
    try {
      store_.finish_session(session_id_, outcome);
    } catch (const StoreError& e) {  // e.g. a full disk: what went wrong first stays in the message
      if (result.status == SessionResult::Status::kDone) result.status = SessionResult::Status::kFailed;
      if (result.error == e.what()) {
        result.error += "; the session's end was not stored either";
      } else {
        result.error += fmt::format("{}the session's end was not stored: {}", result.error.empty() ? "" : "; ", e.what());
      }
    }
  }
  result.session_id = session_id_;
  result.trials_stored = next_ordinal_;
  const bool failed = result.status == SessionResult::Status::kFailed && !result.usage_error;
  result.kept_logs = close_work_dir(work_dir_, any_failed_ || failed);
  return result;
}

}  // namespace

SessionResult run_session(const TuneOptions& options, Store& store, SessionObserver& observer) {
  Session session(options, store, observer);
  return session.run();
}

}  // namespace acspeed::tuner
