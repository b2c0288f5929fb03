#include "acspeed/tuner/session.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "acspeed/comm_methods.h"
#include "acspeed/error.h"
#include "acspeed/fingerprint.h"
#include "acspeed/process/signals.h"
#include "acspeed/tuner/convergence_guard.h"
#include "acspeed/tuner/inflation.h"
#include "acspeed/tuner/statistics.h"
#include "acspeed/tuner/strategy.h"
#include "calibration.h"
#include "compression_hint.h"
#include "decision_evidence.h"
#include "decision_rule.h"
#include "measured.h"
#include "plan.h"
#include "resume.h"
#include "session_record.h"
#include "trial_runner.h"
#include "worker_launch.h"

namespace acspeed::tuner {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", fmt::gmtime(std::chrono::system_clock::to_time_t(now)), ms);
}

class Session {
 public:
  Session(const TuneOptions& options, Store& store, SessionObserver& observer)
      : o_(options), store_(store), observer_(observer) {}
  SessionResult run();

 private:
  void open_session();
  Measured run_trial(const CommConfig& config, const std::string& role, std::optional<int> pair,
                     std::optional<size_t> candidate_index, const std::string& label,
                     TrialMode mode = TrialMode::kDdp, bool with_trajectory = false);
  void calibrate_model();
  void remember(const std::string& role, const CommConfig& config, const TrialMetrics& metrics);
  std::optional<double> bound_of(const CommConfig& config) const;
  bool budget_allows(int trials_ahead) const;
  const Measured* find(const CommConfig& config) const;
  const Measured* best() const;
  const Measured* best_exact() const;
  CandidateEvidence evidence_for(const Measured& candidate) const;
  std::vector<PairRun> run_pairs(const CommConfig& candidate, int first_index, std::string& stopped_because);
  void search();
  void report_search() const;
  void hint_compression() const;
  void ensure_guard_reference();
  void gate_compression(Measured& m) const;
  void note_guard_cost() const;
  void decide();
  const Measured* fidelity_measured(const CommConfig& config) const;

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
  bool any_failed_ = false;
  Clock::time_point started_ = Clock::now();
  std::vector<double> trial_walls_;
  // What the convergence guard's evidence cost this run (trials resumed from the store not counted).
  struct GuardCost {
    int windows = 0, trajectories = 0;
    double fidelity_s = 0, trajectory_s = 0;
  } guard_cost_;
  std::vector<Measured> measured_;  // search results in the order measured (resumed ones first)
  // A resumed session's decision-pair trials (role candidate|baseline), in the order stored.
  std::vector<PairTrial> stored_pair_trials_;
  std::vector<ModelTrial> model_trials_;  // every ok trial, for the step model
  StepModel model_;
  // The uncompressed run on identical data and seeds that compressed trials are judged against.
  std::optional<TrialMetrics> guard_reference_;
};

// What a compressed config's gradient-fidelity window depends on (convergence_guard.h): its
// numerics, not its buckets or lanes.
std::string numerics_key(const CommConfig& config) {
  std::string key(to_string(config.compression));
  if (info(config.compression).ranked) key += fmt::format(" rank {} start {}", config.powersgd_rank, config.powersgd_start_step);
  if (info(config.algorithm).by_node) key += fmt::format(" {}", to_string(config.algorithm));
  return key;
}

// A trial of this session (a search trial, or a stored decision-pair run) whose fidelity window
// and loss trajectory cover `config`'s numerics, or nullptr: both are measured once per numerics.
const Measured* Session::fidelity_measured(const CommConfig& config) const {
  const std::string key = numerics_key(config);
  auto covers = [&key](const Measured& m) {
    const bool trajectory = !m.metrics.trajectory.empty() || m.metrics.trajectory_finite == false;
    return m.metrics.fidelity_cosine && m.metrics.fidelity_norm_error && trajectory && numerics_key(m.config) == key;
  };
  for (const auto& m : measured_) {
    if (covers(m)) return &m;
  }
  for (const auto& p : stored_pair_trials_) {
    if (covers(p.run)) return &p.run;
  }
  return nullptr;
}

void Session::remember(const std::string& role, const CommConfig& config, const TrialMetrics& metrics) {
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
    if (m.cost < kFailedCost && (best == nullptr || m.cost < best->cost)) best = &m;
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

bool Session::budget_allows(int trials_ahead) const {
  if (o_.budget_minutes <= 0 || trial_walls_.empty()) return true;
  const double elapsed = std::chrono::duration<double>(Clock::now() - started_).count();
  const double per_trial = median(trial_walls_);
  return elapsed + per_trial * trials_ahead <= o_.budget_minutes * 60.0;
}

Measured Session::run_trial(const CommConfig& config, const std::string& role, std::optional<int> pair,
                            std::optional<size_t> candidate_index, const std::string& label, TrialMode mode,
                            bool with_trajectory) {
  TrialRecord record;
  record.session_id = session_id_;
  record.ordinal = next_ordinal_++;
  record.role = role;
  record.config_json = config_to_json(config);
  record.started_at = utc_now();
  observer_.trial_started(trials_run_, planned_, label);

  TrialRequest request{record.ordinal, config, o_.warmup, o_.steps, mode};
  // An earlier trial with the same numerics, whose fidelity figures this one carries (measured_ and
  // stored_pair_trials_ do not change while a trial runs).
  const Measured* window = nullptr;
  if (mode == TrialMode::kDdp && changes_numerics(config)) {
    window = fidelity_measured(config);
    if (window == nullptr) {
      request.fidelity_steps = kFidelitySteps;
      request.trajectory_steps = o_.trajectory_steps;
    }
  }
  if (with_trajectory) request.trajectory_steps = o_.trajectory_steps;
  // The window and trajectory this trial reuses (measured once per numerics).
  auto carry_window = [&window](TrialMetrics& metrics) {
    const TrialMetrics& w = window->metrics;
    metrics.fidelity_cosine = w.fidelity_cosine;
    metrics.fidelity_norm_error = w.fidelity_norm_error;
    metrics.fidelity_step_cosine_min = w.fidelity_step_cosine_min;
    metrics.fidelity_steps = w.fidelity_steps;
    metrics.fidelity_trial = w.fidelity_trial.value_or(window->ordinal);
    metrics.trajectory = w.trajectory;
    metrics.trajectory_finite = w.trajectory_finite;
    metrics.trajectory_trial = w.trajectory_trial.value_or(window->ordinal);
  };

  Measured m;
  m.ordinal = record.ordinal;
  m.config = config;
  bool node_lost = false;
  if (role == "search" && window != nullptr && window->metrics.guard.is_object() &&
      window->metrics.guard.value("passed", true) == false) {
    // The guard rejected this numerics on the window and trajectory this trial would reuse, and it
    // judges nothing else (convergence_guard.h): the verdict cannot differ, so the trial is not run.
    record.finished_at = utc_now();
    ++trials_run_;
    carry_window(m.metrics);
    m.metrics.guard = window->metrics.guard;
    m.metrics.inflation = window->metrics.inflation;
    m.status = "failed";
    m.cost = kFailedCost;
    m.error = fmt::format("convergence guard: {} (the verdict on trial {}'s window and trajectory, the same numerics; "
                          "not run)",
                          window->metrics.guard.value("reason", std::string("rejected")),
                          m.metrics.fidelity_trial.value_or(window->ordinal));
  } else {
    const TrialOutcome outcome = workers_->run(request, std::chrono::seconds(o_.trial_timeout_s));
    record.finished_at = utc_now();
    node_lost = outcome.node_lost;
    trial_walls_.push_back(outcome.wall_s);
    ++trials_run_;
    m.status = std::string(to_string(outcome.status));
    m.error = outcome.error;
    if (outcome.status == TrialStatus::kOk) {
      record.step_times_s = outcome.reply.step_times_s;
      m.step_times_s = record.step_times_s;
      m.metrics = with_measurements(metrics_from_steps(record.step_times_s, o_.batch_size, o_.warmup), outcome.reply);
      if (mode == TrialMode::kComputeOnly && !hello_.gradients.empty()) m.metrics.gradients = hello_.gradients;
      if (m.metrics.fidelity_s) {
        ++guard_cost_.windows;
        guard_cost_.fidelity_s += *m.metrics.fidelity_s;
      }
      if (m.metrics.trajectory_s) {
        ++guard_cost_.trajectories;
        guard_cost_.trajectory_s += *m.metrics.trajectory_s;
      }
      m.cost = m.metrics.p50_s;
      if (window != nullptr) carry_window(m.metrics);
      if (m.metrics.finite != true) {
        m.status = "failed";
        m.error = "a loss became NaN/Inf during the trial";
        m.cost = kFailedCost;
      }
    }
  }
  m.metrics.pair = pair;
  if (candidate_index) m.metrics.candidate_index = static_cast<int>(*candidate_index);
  if (role == "search") gate_compression(m);  // before it is stored: the verdict is part of the trial
  record.status = m.status;
  record.error = m.error;
  record.metrics_json = metrics_to_json(m.metrics);
  store_.add_trial(record);  // written as it happens: a killed tuner loses no completed trial
  if (m.status != "ok") any_failed_ = true;

  if (m.status == "ok") remember(role, config, m.metrics);
  TrialEvent event;
  event.ordinal = record.ordinal;
  event.role = role;
  event.label = label;
  event.status = m.status;
  event.error = m.error;
  event.metrics = m.metrics;
  if (m.status == "ok" && mode != TrialMode::kComputeOnly) {
    const Prediction p = predict(model_, config);
    if (p.ok) {
      event.bound_s = p.bound_s;
      event.predicted_s = p.step_s;
    }
  }
  const Measured* fastest = best();
  if (role == "search" && m.cost < kFailedCost && (fastest == nullptr || m.cost < fastest->cost)) fastest = &m;
  if (fastest != nullptr) {
    event.best_config = fastest->config;
    event.best_cost_s = fastest->cost;
  }
  observer_.trial_finished(event);
  // The trial is stored with the reason; without that node no later trial can run.
  if (node_lost) ACS_THROW(Error, "{}; the session ends here", m.error);
  return m;
}

void Session::ensure_guard_reference() {
  const bool compressed_searched = std::any_of(o_.space.compression.begin(), o_.space.compression.end(),
                                               [](Compression c) { return info(c).changes_numerics; });
  if (!compressed_searched) return;
  // A resumed session's uncompressed trajectory, when it stored one.
  for (const auto& m : measured_) {
    if (!changes_numerics(m.config) && m.cost < kFailedCost && !m.metrics.trajectory.empty()) {
      guard_reference_ = m.metrics;
      break;
    }
  }
  if (!guard_reference_) {
    // The search's start when it is uncompressed and not measured yet (then it counts as a search
    // trial), else DDP's defaults; either way with the uncompressed trajectory.
    const CommConfig start = o_.space.config_at(o_.space.default_point());
    const bool in_space = !changes_numerics(start) && find(start) == nullptr;
    const CommConfig reference = in_space ? start : CommConfig{};
    Measured m = run_trial(reference, in_space ? "search" : "baseline", std::nullopt,
                           in_space ? std::optional<size_t>(o_.space.ordinal_of(o_.space.default_point())) : std::nullopt,
                           in_space ? reference.describe()
                                    : fmt::format("{} (the convergence guard's uncompressed reference)",
                                                  reference.describe()),
                           TrialMode::kDdp, true);
    if (m.cost == kFailedCost || m.metrics.trajectory.empty()) {
      ACS_THROW(Error, "the uncompressed reference run for the convergence guard failed ({}): compressed configs "
                       "cannot be judged",
                m.error.empty() ? (m.metrics.trajectory_finite == false ? "a loss of its trajectory became NaN/Inf"
                                                                         : "no loss trajectory")
                                : m.error);
    }
    guard_reference_ = m.metrics;
    if (in_space) measured_.push_back(std::move(m));
  }
  // Resumed compressed trials are judged again against this reference.
  for (auto& m : measured_) gate_compression(m);
}

void Session::search() {
  ensure_guard_reference();
  StrategyOptions strategy_options;
  strategy_options.seed = o_.seed;
  strategy_options.forecast = model_forecast(model_, o_.space);
  auto strategy = make_strategy(strategy_name_, o_.space, strategy_options);
  while (auto point = strategy->next()) {
    const CommConfig config = o_.space.config_at(*point);
    if (const Measured* known = find(config)) {
      strategy->report(*point, known->cost);
      continue;
    }
    // Keep room for this trial and the decision's pairs.
    if (trials_run_ > 0 && !budget_allows(1 + 2 * o_.repeats)) {
      observer_.note(fmt::format("time budget of {:g} min: search stopped after {} trial(s)", o_.budget_minutes,
                                 trials_run_));
      break;
    }
    Measured m = run_trial(config, "search", std::nullopt, o_.space.ordinal_of(*point), config.describe());
    strategy->report(*point, m.cost);
    measured_.push_back(std::move(m));
  }
  if (const std::string summary = strategy->summary(); !summary.empty()) {
    observer_.note(fmt::format("{} strategy: {}", strategy_name_, summary));
  }
}

void Session::gate_compression(Measured& m) const {
  if (!changes_numerics(m.config) || m.cost == kFailedCost || !guard_reference_) return;
  GuardVerdict verdict = judge_convergence(m.metrics, *guard_reference_);
  InflationOptions inflation_options;
  inflation_options.seed = o_.seed;
  const Inflation inflation = measure_inflation(m.metrics.trajectory, guard_reference_->trajectory, inflation_options);
  m.metrics.inflation = inflation;
  verdict.evidence["data"] = guard_data(o_);
  verdict.evidence["trajectory_steps"] = static_cast<int>(m.metrics.trajectory.size());
  m.metrics.guard = verdict.evidence;
  if (!verdict.passed) {
    m.cost = kFailedCost;
    m.status = "failed";
    m.error = "convergence guard: " + verdict.reason;
    observer_.note(fmt::format("  {} rejected by the convergence guard: {}", m.config.describe(), verdict.reason));
  } else if (!inflation.finite_upper()) {
    // Not ranked: nothing bounds how many more steps it needs (decision_rule.h).
    m.cost = kFailedCost;
    observer_.note(fmt::format("  {} not chosen: its step inflation {}", m.config.describe(),
                               inflation.kind == InflationKind::kMeasured
                                   ? inflation.describe() + " has no upper bound"
                                   : "is " + inflation.describe()));
  } else {
    // Ranked by p50 x the upper end of its inflation (decision_rule.h).
    m.cost = m.metrics.p50_s * inflation.high;
  }
}

void Session::hint_compression() const {
  if (o_.compression_searched) return;
  // The share of the default config's step spent waiting for communication, from the probe.
  const Measured* defaults = find(o_.space.config_at(o_.space.default_point()));
  if (defaults == nullptr || defaults->cost == kFailedCost) return;
  if (const auto hint = compression_hint(defaults->metrics, hello_.gradients)) observer_.note(*hint);
}

// What the convergence guard added to the session: its gradient-fidelity windows and loss
// trajectories, against the session's wall time so far.
void Session::note_guard_cost() const {
  const GuardCost& g = guard_cost_;
  if (g.windows == 0 && g.trajectories == 0) return;
  const double session_s = std::chrono::duration<double>(Clock::now() - started_).count();
  observer_.note(fmt::format("convergence guard: {} gradient-fidelity window(s) of {} steps ({:.0f} s) and {} loss "
                             "trajectories of {} steps ({:.0f} s): {:.0f} s of the session's {:.0f} s so far",
                             g.windows, kFidelitySteps, g.fidelity_s, g.trajectories, o_.trajectory_steps,
                             g.trajectory_s, g.fidelity_s + g.trajectory_s, session_s));
}

void Session::report_search() const {
  std::vector<SearchResult> results;
  for (const auto& m : measured_) results.push_back({m.config, m.status, m.cost, m.metrics, bound_of(m.config)});
  std::stable_sort(results.begin(), results.end(),
                   [](const SearchResult& a, const SearchResult& b) { return a.cost_s < b.cost_s; });
  observer_.search_finished(results);
}

// The fastest search result that changes no numerics.
const Measured* Session::best_exact() const {
  const Measured* best = nullptr;
  for (const auto& m : measured_) {
    if (!changes_numerics(m.config) && m.cost < kFailedCost && (best == nullptr || m.cost < best->cost)) best = &m;
  }
  return best;
}

// The inflation of `candidate` and the bar of the decision rule (decision_rule.h).
CandidateEvidence Session::evidence_for(const Measured& candidate) const {
  CandidateEvidence e;
  if (!changes_numerics(candidate.config)) return e;
  e.inflation = candidate.metrics.inflation.value_or(Inflation{});
  const Measured* defaults = find(CommConfig{});
  const Measured* exact = best_exact();
  if (defaults != nullptr && exact != nullptr && defaults->cost < kFailedCost) {
    e.bar = std::max(1.0, defaults->cost / exact->cost);
  }
  return e;
}

// `candidate` alternated with DDP's defaults in o_.repeats pairs, numbered from `first_index` (the
// stored pairs of a resumed session are reused); stops at the first failed or rejected pair.
std::vector<PairRun> Session::run_pairs(const CommConfig& candidate, int first_index, std::string& stopped_because) {
  const RuleOptions rule{o_.loss_tolerance, o_.seed};
  observer_.note(fmt::format("\nconfirming {} against DDP defaults in {} alternated pairs", candidate.describe(),
                             o_.repeats));
  const CommConfig baseline;
  std::vector<PairRun> pairs;
  int reused = 0;
  for (int n = 0; n < o_.repeats && stopped_because.empty(); ++n) {
    const int i = first_index + n;
    const bool candidate_first = n % 2 == 0;
    Measured runs[2];  // candidate, baseline
    const bool stored = stored_pair(stored_pair_trials_, i, candidate, runs);
    if (stored) ++reused;
    for (int k = 0; k < 2 && !stored; ++k) {
      const bool is_candidate = (k == 0) == candidate_first;
      runs[is_candidate ? 0 : 1] =
          run_trial(is_candidate ? candidate : baseline, is_candidate ? "candidate" : "baseline", i, std::nullopt,
                    fmt::format("pair {} {}", n + 1, is_candidate ? candidate.describe() : "DDP defaults"));
    }
    const Measured& c = runs[0];
    const Measured& b = runs[1];
    if (c.status != "ok") {
      stopped_because = fmt::format("the candidate failed in pair {}: {}", n + 1, c.error);
      break;
    }
    if (b.status != "ok") {
      stopped_because = fmt::format("the DDP-defaults baseline failed in pair {}: {}", n + 1, b.error);
      break;
    }
    PairRun pair = pair_of(candidate_first, c, b);
    stopped_because = pair_rejection(candidate, pair, rule);
    pairs.push_back(std::move(pair));
  }
  if (reused > 0) observer_.note(fmt::format("  {} pair(s) stored before the interruption reused", reused));
  return pairs;
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

  Decision decision;
  // The workers count the nodes by the rule `import acspeed` looks up with (node_count.h).
  decision.key = {fp_.instance_type, hello_.model_signature, std::string(to_string(o_.precision)), hello_.world_size,
                  hello_.nnodes, o_.gpus_shared};
  decision.model_name = o_.model;
  decision.session_id = session_id_;
  decision.torch_version = hello_.torch_version;
  decision.nccl_version = hello_.nccl_version;  // torch's, what `import acspeed` compares with
  decision.cuda_version = hello_.cuda_version;
  decision.batch_size = o_.batch_size;
  json evidence = decision_evidence(o_, best, strategy_name_, measured_.size());
  const RuleOptions rule{o_.loss_tolerance, o_.seed};

  std::vector<PairRun> pairs;
  std::string stopped_because;
  if (!best.config.is_default()) {
    pairs = run_pairs(best.config, 0, stopped_because);
    evidence["pairs"] = pairs;
    evidence["loss_tolerance"] = o_.loss_tolerance;
  }
  Verdict verdict = judge(best.config, pairs, stopped_because, rule, evidence_for(best));
  evidence["speedups"] = verdict.speedups;
  CommConfig chosen = verdict.accepted ? best.config : CommConfig{};
  std::string note = verdict.note;
  // A compressed candidate that fails: the best non-compressing config goes to the pairs instead.
  const Measured* exact = best_exact();
  if (!verdict.accepted && changes_numerics(best.config) && exact != nullptr && !exact->config.is_default()) {
    evidence["compressed_candidate"] = {{"candidate", best.config},
                                        {"pairs", pairs},
                                        {"speedups", verdict.speedups},
                                        {"note", verdict.note}};
    std::string stopped;
    const std::vector<PairRun> exact_pairs = run_pairs(exact->config, o_.repeats, stopped);
    const Verdict fallback = judge(exact->config, exact_pairs, stopped, rule, evidence_for(*exact));
    evidence["candidate"] = exact->config;
    evidence["guard"] = nullptr;
    evidence["pairs"] = exact_pairs;
    evidence["speedups"] = fallback.speedups;
    note = fmt::format("{} (the compressed {})", fallback.note, verdict.note.substr(verdict.note.find("candidate ")));
    chosen = fallback.accepted ? exact->config : CommConfig{};
    verdict = fallback;
  }
  // The fastest step of the search, when a compressed config had it and was not ranked first.
  const Measured* fastest_step = nullptr;
  for (const auto& m : measured_) {
    if (m.status == "ok" && (fastest_step == nullptr || m.metrics.p50_s < fastest_step->metrics.p50_s)) fastest_step = &m;
  }
  if (fastest_step != nullptr && changes_numerics(fastest_step->config) && !(fastest_step->config == best.config) &&
      fastest_step->metrics.inflation) {
    note += fmt::format("; the fastest step, {} ({}), was ranked {}: its step inflation is {}",
                        fastest_step->config.describe(), format_seconds(fastest_step->metrics.p50_s),
                        fastest_step->cost < kFailedCost ? "lower" : "out", fastest_step->metrics.inflation->describe());
  }
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
  strategy_name_ = resolve_strategy_name(o_.strategy, o_.space);
  workers_ = std::make_unique<WorkerGroup>(make_launch(o_, work_dir_));
  std::string outcome = "failed";
  try {
    observer_.note("starting the trial workers...");
    hello_ = workers_->start();
    fp_ = fingerprint({hello_.torch_version});
    store_.record_instance_type(fp_);
    observer_.note(fmt::format("workers: world size {} ({} node(s)), {} on {}, model {} ({} parameters, {:.1f} MiB "
                               "of gradients), signature {}, probe: {}",
                               hello_.world_size, hello_.nnodes, hello_.backend, hello_.device, hello_.model,
                               hello_.param_count, static_cast<double>(hello_.param_bytes) / (1 << 20),
                               hello_.model_signature, hello_.probe.empty() ? "none" : hello_.probe));
    open_session();
    observer_.note(fmt::format("session {} in {}", session_id_, store_.path()));
    planned_ = planned_search_trials(strategy_name_, o_.space) + 2 * o_.repeats;
    calibrate_model();
    search();
    report_search();
    note_guard_cost();
    hint_compression();
    decide();
    outcome = "done";
    result.status = SessionResult::Status::kDone;
  } catch (const process::Interrupted& e) {
    outcome = "interrupted";
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
  if (any_failed_ || failed) {
    remove_torchrun_logs(work_dir_);
    result.kept_logs = work_dir_;
  } else {
    std::error_code ec;
    std::filesystem::remove_all(work_dir_, ec);
  }
  return result;
}

}  // namespace

SessionResult run_session(const TuneOptions& options, Store& store, SessionObserver& observer) {
  Session session(options, store, observer);
  return session.run();
}

}  // namespace acspeed::tuner
