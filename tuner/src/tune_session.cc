#include "tune_session.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "acspeed/error.h"
#include "acspeed/fingerprint.h"
#include "acspeed/log.h"
#include "acspeed/process/signals.h"
#include "acspeed/python_interpreter.h"
#include "acspeed/settings.h"
#include "acspeed/store.h"
#include "progress.h"
#include "statistics.h"
#include "strategy.h"
#include "table.h"
#include "trial_metrics.h"
#include "trial_runner.h"

namespace acspeed::tuner {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", fmt::gmtime(std::chrono::system_clock::to_time_t(now)), ms);
}

std::string seconds_text(double s) { return s < 1 ? fmt::format("{:.1f} ms", s * 1e3) : fmt::format("{:.3f} s", s); }

// A folder for the control socket and the worker logs (short path: Unix sockets allow ~107 bytes).
std::string make_work_dir() {
  std::string pattern = "/tmp/acspeed-tune-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) ACS_THROW(Error, "cannot create a work folder under /tmp: {}", std::strerror(errno));
  return pattern;
}

WorkerLaunch make_launch(const TuneOptions& o, const std::string& work_dir) {
  WorkerLaunch l;
  l.python = python_interpreter();
  l.python_path = python_source_dir();
  l.worker_args = {"--model",      o.model,
                   "--batch-size", std::to_string(o.batch_size),
                   "--image-size", std::to_string(o.image_size),
                   "--precision",  o.precision};
  l.nnodes = o.nnodes;
  l.node_rank = o.node_rank;
  l.nproc_per_node = o.nproc_per_node;
  l.master_addr = o.master_addr;
  l.master_port = o.master_port;
  l.work_dir = work_dir;
  l.start_timeout = std::chrono::seconds(std::max(120, o.trial_timeout_s));
  return l;
}

// Cost of a measured trial for the search: its median step time; failures cost infinity.
struct Measured {
  CommConfig config;
  std::string status;  // ok|failed|timeout
  std::string error;
  double cost = kFailedCost;
  std::vector<double> step_times_s;  // raw, max over ranks per step
  TrialMetrics metrics;
};

double cost_of(const TrialRecord& t) {
  if (t.status != "ok" || t.step_times_s.empty()) return kFailedCost;
  return median(t.step_times_s);
}

json settings_in_environment() {
  json j = json::object();
  for (const auto& spec : all_settings()) {
    if (auto value = setting_raw(spec.name)) j[spec.name] = *value;
  }
  return j;
}

int planned_search_trials(const std::string& strategy, const SearchSpace& space) {
  if (strategy == "grid") return static_cast<int>(space.size());
  int n = 1;  // the start, then one sweep over every knob (further sweeps only when it moved)
  for (size_t d : space.dims()) n += static_cast<int>(d) - 1;
  return n;
}

class Session {
 public:
  Session(const TuneOptions& options, const cli::GlobalOptions& global) : o_(options), global_(global) {}
  int run();

 private:
  void open_session(const WorkerHello& hello, const Fingerprint& fp);
  Measured run_trial(const CommConfig& config, const std::string& role, std::optional<int> pair,
                     std::optional<size_t> candidate_index, const std::string& label);
  bool budget_allows(int trials_ahead) const;
  void search();
  void decide();
  void print_summary() const;
  void hint_compression() const;
  void gate_compression(Measured& m) const;

  const TuneOptions& o_;
  const cli::GlobalOptions& global_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<WorkerGroup> workers_;
  std::unique_ptr<Progress> progress_;
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
  std::map<std::string, Measured> measured_;  // search results by config JSON (incl. resumed ones)
};

void Session::open_session(const WorkerHello& hello, const Fingerprint& fp) {
  if (o_.resume) {
    const auto record = store_->session(*o_.resume);
    if (!record) ACS_THROW(InvalidArgument, "--resume {}: no such session in {}", *o_.resume, store_->path());
    if (record->model_signature != hello.model_signature || record->world_size != hello.world_size) {
      ACS_THROW(Error, "--resume {}: the session tuned model signature {} at world size {}, these workers have {} at {}",
                *o_.resume, record->model_signature, record->world_size, hello.model_signature, hello.world_size);
    }
    session_id_ = record->id;
    int resumed = 0;
    for (const auto& t : store_->trials(session_id_)) {
      next_ordinal_ = std::max(next_ordinal_, t.ordinal + 1);
      if (t.role != "search") continue;  // decision pairs are run again in full
      Measured m;
      m.config = config_from_json(t.config_json);
      m.status = t.status;
      m.error = t.error;
      m.cost = cost_of(t);
      m.step_times_s = t.step_times_s;
      m.metrics = metrics_from_json(t.metrics_json);
      if (t.status == "ok" && !m.metrics.finite) m.cost = kFailedCost;
      measured_[t.config_json] = m;
      ++resumed;
    }
    for (auto& [key, m] : measured_) gate_compression(m);
    progress_->note(fmt::format("resuming session {}: {} search trial(s) already measured are reused", session_id_,
                                resumed));
    return;
  }
  SessionRecord s;
  s.instance_type = fp.instance_type;
  s.model_name = o_.model;
  s.model_signature = hello.model_signature;
  s.precision = o_.precision;
  s.world_size = hello.world_size;
  s.nnodes = o_.nnodes;
  s.batch_size = o_.batch_size;
  s.strategy = strategy_name_;
  s.seed = static_cast<int64_t>(o_.seed);
  s.search_space_json = o_.space.to_json();
  s.options_json = json{{"args", o_.args},
                        {"command_line", global_.command_line},
                        {"settings", settings_in_environment()},
                        {"batch_size", o_.batch_size},
                        {"image_size", o_.image_size},
                        {"warmup", o_.warmup},
                        {"steps", o_.steps},
                        {"repeats", o_.repeats},
                        {"budget_minutes", o_.budget_minutes},
                        {"trial_timeout_s", o_.trial_timeout_s},
                        {"loss_tolerance", o_.loss_tolerance},
                        {"nproc_per_node", o_.nproc_per_node},
                        {"notes", o_.notes}}
                       .dump();
  json details = json::object();
  for (const auto& [k, v] : fp.details) details[k] = v;
  s.versions_json = json{{"acspeed", ACSPEED_VERSION_STRING},
                         {"torch", hello.torch_version},
                         {"nccl", hello.nccl_version},
                         {"cuda", hello.cuda_version},
                         {"backend", hello.backend},
                         {"device", hello.device},
                         {"protocol", kProtocolVersion},
                         {"fingerprint", details}}
                        .dump();
  session_id_ = store_->create_session(s);
}

bool Session::budget_allows(int trials_ahead) const {
  if (o_.budget_minutes <= 0 || trial_walls_.empty()) return true;
  const double elapsed = std::chrono::duration<double>(Clock::now() - started_).count();
  const double per_trial = median(trial_walls_);
  return elapsed + per_trial * trials_ahead <= o_.budget_minutes * 60.0;
}

Measured Session::run_trial(const CommConfig& config, const std::string& role, std::optional<int> pair,
                            std::optional<size_t> candidate_index, const std::string& label) {
  TrialRecord record;
  record.session_id = session_id_;
  record.ordinal = next_ordinal_++;
  record.role = role;
  record.config_json = config_to_json(config);
  record.started_at = utc_now();
  progress_->trial_started(trials_run_, planned_, label);

  TrialRequest request{record.ordinal, config, o_.warmup, o_.steps};
  const TrialOutcome outcome = workers_->run(request, std::chrono::seconds(o_.trial_timeout_s));
  record.finished_at = utc_now();
  trial_walls_.push_back(outcome.wall_s);
  ++trials_run_;

  Measured m;
  m.config = config;
  m.status = std::string(to_string(outcome.status));
  m.error = outcome.error;
  if (outcome.status == TrialStatus::kOk) {
    record.step_times_s = outcome.reply.step_times_s;
    m.step_times_s = record.step_times_s;
    m.metrics = metrics_from_steps(record.step_times_s, o_.batch_size, o_.warmup);
    const auto& w = outcome.reply.measured;
    m.metrics.loss_first = w.loss_first;
    m.metrics.loss = w.loss;
    m.metrics.finite = w.finite;
    m.metrics.rebuild_s = w.rebuild_s;
    m.metrics.compute_s = w.compute_s;
    m.metrics.comm_s = w.comm_s;
    m.metrics.exposed_comm_s = w.exposed_comm_s;
    m.metrics.probe = w.probe;
    m.cost = m.metrics.p50_s;
    if (!w.finite) {
      m.status = "failed";
      m.error = "a loss became NaN/Inf during the trial";
      m.cost = kFailedCost;
    }
  }
  m.metrics.pair = pair;
  if (candidate_index) m.metrics.candidate_index = static_cast<int>(*candidate_index);
  record.status = m.status;
  record.error = m.error;
  record.metrics_json = metrics_to_json(m.metrics);
  store_->add_trial(record);  // written as it happens: a killed tuner loses no completed trial
  if (m.status != "ok") any_failed_ = true;

  std::string line = fmt::format("trial {:>3} {:<9} {:<44}", record.ordinal, role, label);
  if (m.status == "ok") {
    line += fmt::format(" p50 {}  {:.1f}/s per device", seconds_text(m.metrics.p50_s), m.metrics.samples_per_s);
    if (m.metrics.exposed_comm_s) line += fmt::format("  exposed comm {}", seconds_text(*m.metrics.exposed_comm_s));
  } else {
    line += fmt::format(" {}: {}", m.status == "timeout" ? "TIMEOUT" : "FAILED", m.error);
  }
  const Measured* best = role == "search" && m.cost < kFailedCost ? &m : nullptr;
  for (const auto& [key, v] : measured_) {
    if (v.cost < kFailedCost && (best == nullptr || v.cost < best->cost)) best = &v;
  }
  progress_->trial_finished(line, best == nullptr ? "" : fmt::format("{} ({})", seconds_text(best->cost),
                                                                     best->config.describe()));
  return m;
}

void Session::search() {
  StrategyOptions strategy_options;
  strategy_options.seed = o_.seed;
  auto strategy = make_strategy(strategy_name_, o_.space, strategy_options);
  while (auto point = strategy->next()) {
    const CommConfig config = o_.space.config_at(*point);
    const std::string key = config_to_json(config);
    if (auto it = measured_.find(key); it != measured_.end()) {
      strategy->report(*point, it->second.cost);
      continue;
    }
    // Keep room for this trial and the decision's pairs.
    if (trials_run_ > 0 && !budget_allows(1 + 2 * o_.repeats)) {
      progress_->note(fmt::format("time budget of {:g} min: search stopped after {} trial(s)", o_.budget_minutes,
                                  trials_run_));
      break;
    }
    Measured m = run_trial(config, "search", std::nullopt, o_.space.ordinal_of(*point), config.describe());
    gate_compression(m);
    measured_[key] = m;
    strategy->report(*point, m.cost);
  }
}

void Session::gate_compression(Measured& m) const {
  if (m.config.compression == Compression::kNone || m.cost == kFailedCost || !m.metrics.loss) return;
  // Every trial starts from the same weights and batch, so an uncompressed trial's final loss is the
  // reference; the decision pairs check again against the paired baseline.
  for (const auto& [key, other] : measured_) {
    if (other.config.compression != Compression::kNone || other.cost == kFailedCost || !other.metrics.loss) continue;
    if (!loss_within_tolerance(*m.metrics.loss, *other.metrics.loss, o_.loss_tolerance, other.metrics.loss_first)) {
      m.cost = kFailedCost;
      progress_->note(fmt::format("  {} compression rejected: loss {:.6g} vs {:.6g} uncompressed (--loss-tolerance {:g})",
                                  to_string(m.config.compression), *m.metrics.loss, *other.metrics.loss,
                                  o_.loss_tolerance));
    }
    return;
  }
}

void Session::hint_compression() const {
  if (o_.compression_searched) return;
  // The share of the default config's step spent waiting for communication, from the probe.
  const auto it = measured_.find(config_to_json(o_.space.config_at(o_.space.default_point())));
  if (it == measured_.end() || it->second.cost == kFailedCost) return;
  const auto& m = it->second.metrics;
  const auto comm = m.exposed_comm_s ? m.exposed_comm_s : m.comm_s;
  if (!comm || m.p50_s <= 0) return;
  const double share = *comm / m.p50_s;
  if (share >= 0.4) {
    progress_->note(fmt::format(
        "note: communication is {:.0f}% of the step ({} of {}) and compression was not searched: "
        "`--compression none,fp16` (or bf16) may help; it changes numerics, so the tuner only keeps it when the "
        "loss stays within --loss-tolerance",
        share * 100, seconds_text(*comm), seconds_text(m.p50_s)));
  }
}

void Session::print_summary() const {
  std::vector<const Measured*> rows;
  for (const auto& [key, m] : measured_) rows.push_back(&m);
  std::sort(rows.begin(), rows.end(), [](const Measured* a, const Measured* b) { return a->cost < b->cost; });
  Table table({"config", "p50 (s)", "p90 (s)", "samples/s per device", "exposed comm (s)", "status"});
  for (const Measured* m : rows) {
    const bool ok = m->status == "ok";
    table.add({m->config.describe(), ok ? fmt::format("{:.4f}", m->metrics.p50_s) : "-",
               ok ? fmt::format("{:.4f}", m->metrics.p90_s) : "-",
               ok ? fmt::format("{:.1f}", m->metrics.samples_per_s) : "-",
               ok && m->metrics.exposed_comm_s ? fmt::format("{:.4f}", *m->metrics.exposed_comm_s) : "-", m->status});
  }
  fmt::print("\nsearch results (step time = max over ranks per step):\n");
  std::fflush(stdout);
  table.print();
}

void Session::decide() {
  const Measured* best = nullptr;
  for (const auto& [key, m] : measured_) {
    if (m.cost < kFailedCost && (best == nullptr || m.cost < best->cost)) best = &m;
  }
  if (best == nullptr) ACS_THROW(Error, "every search trial failed: nothing to decide (see the errors above)");

  Decision decision;
  decision.key = {fp_.instance_type, hello_.model_signature, o_.precision, hello_.world_size, o_.nnodes};
  decision.model_name = o_.model;
  decision.session_id = session_id_;
  decision.torch_version = hello_.torch_version;
  decision.nccl_version = hello_.nccl_version;  // torch's, what `import acspeed` compares with
  decision.cuda_version = hello_.cuda_version;
  decision.batch_size = o_.batch_size;
  json evidence = {{"seed", o_.seed},
                   {"method", "Student t 95% interval of the mean log pair speedup"},
                   {"candidate", json::parse(config_to_json(best->config))},
                   {"search", {{"strategy", strategy_name_}, {"measured", measured_.size()}, {"best_p50_s", best->cost}}}};

  const CommConfig baseline;
  if (best->config.is_default()) {
    decision.config = baseline;
    decision.note = "DDP defaults were the fastest configuration measured: keep DDP defaults";
    decision.evidence_json = evidence.dump();
    const int64_t id = store_->add_decision(decision, true);
    progress_->note(fmt::format("decision {}: {}", id, decision.note));
    return;
  }

  progress_->note(fmt::format("\nconfirming {} against DDP defaults in {} alternated pairs", best->config.describe(),
                              o_.repeats));
  std::vector<std::vector<double>> candidate_steps, baseline_steps;
  json pairs = json::array();
  std::string rejection;
  const bool compressed = best->config.compression != Compression::kNone;
  for (int i = 0; i < o_.repeats && rejection.empty(); ++i) {
    const bool candidate_first = i % 2 == 0;
    Measured runs[2];
    for (int k = 0; k < 2; ++k) {
      const bool is_candidate = (k == 0) == candidate_first;
      runs[is_candidate ? 0 : 1] = run_trial(is_candidate ? best->config : baseline, is_candidate ? "candidate" : "baseline",
                                             i, std::nullopt,
                                             fmt::format("pair {} {}", i + 1, is_candidate ? best->config.describe()
                                                                                             : "DDP defaults"));
    }
    const Measured& c = runs[0];
    const Measured& b = runs[1];
    if (c.status != "ok") {
      rejection = fmt::format("the candidate failed in pair {}: {}", i + 1, c.error);
      break;
    }
    if (b.status != "ok") {
      rejection = fmt::format("the DDP-defaults baseline failed in pair {}: {}", i + 1, b.error);
      break;
    }
    const auto& c_steps = c.step_times_s;
    const auto& b_steps = b.step_times_s;
    candidate_steps.push_back(c_steps);
    baseline_steps.push_back(b_steps);
    json pair = {{"order", candidate_first ? "candidate-first" : "baseline-first"},
                 {"candidate_step_times_s", c_steps},
                 {"baseline_step_times_s", b_steps},
                 {"speedup", median(b_steps) / median(c_steps)}};
    if (c.metrics.loss) pair["candidate_loss"] = *c.metrics.loss;
    if (b.metrics.loss) pair["baseline_loss"] = *b.metrics.loss;
    pairs.push_back(pair);
    // Same weights, same batches: the candidate must end with DDP's loss (compression: within the
    // tolerance; exact algorithms: the same up to summation order, so the tolerance is ample).
    if (c.metrics.loss && b.metrics.loss &&
        !loss_within_tolerance(*c.metrics.loss, *b.metrics.loss, o_.loss_tolerance, b.metrics.loss_first)) {
      rejection = fmt::format("its loss after the trial was {:.6g} vs {:.6g} with DDP defaults, beyond "
                              "--loss-tolerance {:g}{}",
                              *c.metrics.loss, *b.metrics.loss, o_.loss_tolerance,
                              compressed ? "" : " (an exact algorithm should match: a bug in the comm hook?)");
    }
  }
  evidence["pairs"] = pairs;
  if (candidate_steps.size() >= 2) {
    const auto s = paired_speedup(candidate_steps, baseline_steps, IntervalMethod::kStudentT, o_.seed);
    decision.speedup = s.speedup;
    decision.ci_low = s.ci_low;
    decision.ci_high = s.ci_high;
    evidence["pair_speedups"] = s.speedups;
    if (rejection.empty() && !s.accepted) {
      rejection = fmt::format("its speedup {:.3f}x has a 95% interval [{:.3f}, {:.3f}] that does not exclude 1",
                              s.speedup, s.ci_low, s.ci_high);
    }
  } else if (rejection.empty()) {
    rejection = "fewer than two pairs completed";
  }
  evidence["loss_tolerance"] = o_.loss_tolerance;
  decision.evidence_json = evidence.dump();
  if (rejection.empty()) {
    decision.config = best->config;
    decision.note = fmt::format("{}: {:.3f}x over DDP defaults, 95% interval [{:.3f}, {:.3f}] over {} pairs",
                                best->config.describe(), *decision.speedup, *decision.ci_low, *decision.ci_high,
                                candidate_steps.size());
  } else {
    decision.config = baseline;
    decision.note = fmt::format("keep DDP defaults: candidate {} rejected: {}", best->config.describe(), rejection);
  }
  const int64_t id = store_->add_decision(decision, true);
  progress_->note(fmt::format("decision {} (active for {} / {} / {} / world size {} / {} node(s)): {}", id,
                              decision.key.instance_type, o_.model, o_.precision, hello_.world_size, o_.nnodes,
                              decision.note));
}

int Session::run() {
  store_ = cli::open_store(global_, true);  // a read-only store is refused before anything runs
  work_dir_ = make_work_dir();
  strategy_name_ = resolve_strategy_name(o_.strategy, o_.space);
  const std::chrono::seconds budget(static_cast<int64_t>(o_.budget_minutes * 60));
  progress_ = std::make_unique<Progress>(budget, Progress::stderr_is_terminal());
  workers_ = std::make_unique<WorkerGroup>(make_launch(o_, work_dir_));
  std::string outcome = "failed";
  std::string error;
  int code = cli::kExitFailure;
  try {
    progress_->note("starting the trial workers...");
    hello_ = workers_->start();
    fp_ = fingerprint({hello_.torch_version});
    store_->record_instance_type(fp_);
    progress_->note(fmt::format("workers: world size {} ({} node(s)), {} on {}, model {} ({} parameters, {:.1f} MiB "
                                "of gradients), signature {}, probe: {}",
                                hello_.world_size, o_.nnodes, hello_.backend, hello_.device, hello_.model,
                                hello_.param_count, static_cast<double>(hello_.param_bytes) / (1 << 20),
                                hello_.model_signature, hello_.probe.empty() ? "none" : hello_.probe));
    open_session(hello_, fp_);
    progress_->note(fmt::format("session {} in {}", session_id_, store_->path()));
    planned_ = planned_search_trials(strategy_name_, o_.space) + 2 * o_.repeats;
    search();
    print_summary();
    hint_compression();
    decide();
    outcome = "done";
    code = cli::kExitOk;
  } catch (const process::Interrupted& e) {
    outcome = "interrupted";
    code = 128 + e.signo();
  } catch (const InvalidArgument& e) {
    error = e.what();
    code = cli::kExitUsage;
  } catch (const Error& e) {
    error = e.what();
  }
  workers_.reset();
  progress_.reset();
  if (!error.empty()) fmt::print(stderr, "acspeed-tune tune: error: {}\n", error);
  if (session_id_ > 0) store_->finish_session(session_id_, outcome);
  if (outcome == "interrupted" && session_id_ > 0) {
    fmt::print(stderr, "interrupted: {} trial(s) stored; continue with `acspeed-tune --resume {}`\n", next_ordinal_,
               session_id_);
  }
  if (any_failed_ || code == cli::kExitFailure) {
    fmt::print(stderr, "worker logs kept in {}\n", work_dir_);
  } else {
    std::error_code ec;
    std::filesystem::remove_all(work_dir_, ec);
  }
  return code;
}

}  // namespace

void print_plan(const TuneOptions& o, const std::string& strategy_name, const std::string& instance_type) {
  for (const auto& note : o.notes) fmt::print("note: {}\n", note);
  fmt::print("plan: tune {} ({} precision) on {}: {} node(s) x {} rank(s), batch {} per device", o.model, o.precision,
             instance_type, o.nnodes, o.nproc_per_node, o.batch_size);
  if (o.model.find(':') == std::string::npos) fmt::print(", {}x{} images", o.image_size, o.image_size);
  fmt::print("\n  search space: {}\n", o.space.describe());
  for (const auto& pinned : o.space.pinned) fmt::print("  pinned (not searched): {}\n", pinned);
  const int search_trials = planned_search_trials(strategy_name, o.space);
  std::string summary;
  for (const auto& info : strategies()) {
    if (info.name == strategy_name) summary = info.summary;
  }
  fmt::print("  strategy: {}: {} ({} {} trial(s)), seed {}\n", strategy_name, summary,
             strategy_name == "grid" ? "exactly" : "about", search_trials, o.seed);
  fmt::print("  each trial: {} warm-up + {} timed steps, timeout {} s; decision: {} alternated pairs vs DDP defaults\n",
             o.warmup, o.steps, o.trial_timeout_s, o.repeats);
  if (o.budget_minutes > 0) fmt::print("  time budget: {:g} min for the whole session\n", o.budget_minutes);
  if (o.resume) fmt::print("  resuming session {}\n", *o.resume);
  WorkerLaunch launch = make_launch(o, "/tmp/acspeed-tune-XXXXXX");
  auto argv = torchrun_argv(launch, o.master_port, o.node_rank == 0 ? "/tmp/acspeed-tune-XXXXXX/control.sock" : "");
  for (auto& arg : argv) {
    if (arg == "--master_port=0") arg = "--master_port=<a free port>";
  }
  fmt::print("  workers (node {}): {}\n", o.node_rank, fmt::join(argv, " "));
  std::fflush(stdout);
}

int run_tune(const TuneOptions& options, const cli::GlobalOptions& global) {
  if (options.node_rank > 0) {
    const std::string work_dir = make_work_dir();
    fmt::print("node {}: supervising the local workers; node 0 ({}:{}) coordinates and writes the store\n",
               options.node_rank, options.master_addr, options.master_port);
    std::fflush(stdout);
    return supervise_workers(make_launch(options, work_dir), std::chrono::seconds(std::max(600, 2 * options.trial_timeout_s)));
  }
  Session session(options, global);
  return session.run();
}

}  // namespace acspeed::tuner
