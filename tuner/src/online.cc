#include "acspeed/tuner/online.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "acspeed/error.h"
#include "acspeed/settings.h"
#include "acspeed/tuner/knobs.h"
#include "acspeed/tuner/trial_metrics.h"
#include "acspeed/tuner/session.h"
#include "acspeed/tuner/statistics.h"
#include "acspeed/tuner/strategy.h"
#include "decision_rule.h"

namespace acspeed::tuner {

OnlineSpace online_space(const nlohmann::json& ddp_arguments, int world_size, int nnodes, bool gpu,
                         bool rebuild_reducer) {
  if (!ddp_arguments.is_object()) {
    ACS_THROW(InvalidArgument, "the job's DDP arguments must be a JSON object, got {}", ddp_arguments.dump());
  }
  std::vector<std::string> accepted;
  for (const auto& knob : knobs()) {
    if (!knob.ddp_argument.empty()) accepted.push_back(knob.ddp_argument);
  }
  nlohmann::json job = CommConfig{};  // the job's own values, read as a config (its keys are DDP's names)
  for (const auto& [name, value] : ddp_arguments.items()) {
    if (std::find(accepted.begin(), accepted.end(), name) == accepted.end()) {
      ACS_THROW(InvalidArgument, "DDP argument '{}' is not one online tuning knows (accepted: {})", name,
                fmt::join(accepted, ", "));
    }
    job[name] = value;
  }
  CommConfig own = job.get<CommConfig>();
  apply_env_pins(own);

  OnlineSpace out;
  SearchSpace& s = out.space;
  s = tune_options_for(gpu).space;  // the offline defaults' values
  const KnobContext context{nnodes, world_size, gpu};
  for (const auto& knob : knobs()) {
    if (knob.unset) knob.unset(s, context);
  }
  apply_pins(s);
  for (const auto& knob : knobs()) {
    const bool passed = !knob.ddp_argument.empty() && ddp_arguments.contains(knob.ddp_argument);
    const bool needs_rebuild = !passed && knob.switchable && !knob.ddp_argument.empty() && !rebuild_reducer;
    if (passed) s.pinned.push_back(fmt::format("{} (DDP argument {})", knob.name, knob.ddp_argument));
    if (needs_rebuild) {
      s.pinned.push_back(fmt::format("{} (switching it rebuilds DDP's reducer, which this job cannot do)", knob.name));
    }
    if (passed || needs_rebuild || !knob.switchable || (knob.needs_gpu && !gpu)) knob.pin(s, own);
  }
  out.baseline = s.config_at(s.default_point());
  return out;
}

std::optional<StepModel> online_step_model(const Store& store, const std::string& instance_type,
                                           const std::string& model_signature, const std::string& precision,
                                           int nnodes) {
  auto sessions = store.sessions();
  std::sort(sessions.begin(), sessions.end(), [](const auto& a, const auto& b) { return a.id > b.id; });
  for (const bool same_precision : {true, false}) {
    for (const auto& session : sessions) {
      if (session.instance_type != instance_type || session.model_signature != model_signature ||
          session.nnodes != nnodes || (same_precision && session.precision != precision)) {
        continue;
      }
      StepModel model = session_model(store, session);
      if (model.compute_s && model.payload_bytes) return model;
    }
  }
  return std::nullopt;
}

TrialRole WindowRecord::trial_role() const {
  if (phase != "decision" || pair < 0) return TrialRole::kSearch;
  return plan.role == WindowRole::kCandidate ? TrialRole::kCandidate : TrialRole::kBaseline;
}

void to_json(nlohmann::json& j, const WindowRecord& w) {
  j = {{"index", w.plan.index},
       {"first_step", w.plan.first_step},
       {"config", w.plan.config},
       {"role", w.plan.role == WindowRole::kCandidate ? "candidate" : "baseline"},
       {"trial_role", to_string(w.trial_role())},
       {"phase", w.phase},
       {"pair", w.pair},
       {"steps", w.plan.steps},
       {"discarded", w.plan.discard},
       {"used", w.used},
       {"step_times_s", w.step_times_s}};
}

namespace {

// A config measured against the baseline in pairs.
struct Candidate {
  Point point;
  size_t ordinal = 0;
  CommConfig config;
  bool decision = false;  // the judged candidate (else a search candidate)
  int needed = 0;         // pairs whose results conclude it
  std::vector<int> pairs;
  bool first_checked = false;  // its first window was compared with the baseline ("clearly slower")
  bool concluded = false;
};

struct PairWindows {
  int candidate = 0;  // index into candidates
  bool candidate_first = true;
  int candidate_window = -1;
  int baseline_window = -1;
  bool abandoned = false;  // its candidate was dropped before its second window was planned
};

}  // namespace

struct OnlineTuner::State {
  OnlineSpace space;
  OnlineOptions o;
  std::unique_ptr<Strategy> descent;
  std::vector<WindowRecord> windows;
  std::vector<PairWindows> pairs;
  std::vector<Candidate> candidates;
  int current = -1;  // the candidate whose pairs are being planned or awaited
  int pushed = 0;
  bool search_done = false;
  std::string search_end;  // why the search ended early ("" when the descent ended it)
  std::map<size_t, double> cost;           // ordinal -> 1 / paired speedup (the baseline's: 1)
  std::vector<size_t> measured_order;      // the ordinals of `cost`, in the order they were measured
  std::map<size_t, double> candidate_p50;  // ordinal -> median of its used candidate windows' steps
  std::vector<std::string> dropped;        // "config: first window 1.25x the baseline's"

  bool settled = false;
  CommConfig decision;
  std::string note;
  Verdict verdict;
  std::vector<PairRun> decision_pairs;
  std::optional<size_t> judged;  // ordinal of the judged candidate

  int plan_count() const { return static_cast<int>(windows.size()); }

  void plan_window(size_t ordinal, WindowRole role, const std::string& phase, int pair) {
    WindowRecord w;
    w.plan.index = plan_count();
    w.plan.ordinal = ordinal;
    w.plan.config = space.space.config_at(space.space.point_at(ordinal));
    w.plan.role = role;
    const size_t before = windows.empty() ? baseline_ordinal() : windows.back().plan.ordinal;
    w.plan.discard = before == ordinal ? 0 : o.discard_steps;
    w.plan.steps = o.window_steps + w.plan.discard;
    w.plan.first_step = windows.empty() ? o.warmup_steps : windows.back().plan.first_step + windows.back().plan.steps;
    w.phase = phase;
    w.pair = pair;
    windows.push_back(std::move(w));
  }

  size_t baseline_ordinal() const { return space.space.ordinal_of(space.space.default_point()); }

  // The next pair of candidate `c`: candidate and baseline windows, in the order the pair number gives.
  void plan_pair(int c) {
    PairWindows p;
    p.candidate = c;
    p.candidate_first = pairs.size() % 2 == 1;  // B C | C B | B C ...
    const int id = static_cast<int>(pairs.size());
    candidates[static_cast<size_t>(c)].pairs.push_back(id);
    pairs.push_back(p);
    plan_pair_window();
  }

  // The pair's first window, or its second.
  void plan_pair_window() {
    PairWindows& p = pairs.back();
    const Candidate& c = candidates[static_cast<size_t>(p.candidate)];
    const bool first = p.candidate_window < 0 && p.baseline_window < 0;
    const bool candidate_now = first == p.candidate_first;
    const std::string phase = c.decision ? "decision" : "search";
    const int id = static_cast<int>(pairs.size()) - 1;
    if (candidate_now) {
      p.candidate_window = plan_count();
      plan_window(c.ordinal, WindowRole::kCandidate, phase, id);
    } else {
      p.baseline_window = plan_count();
      plan_window(baseline_ordinal(), WindowRole::kBaseline, phase, id);
    }
  }

  bool pair_open() const {
    return !pairs.empty() && !pairs.back().abandoned &&
           (pairs.back().candidate_window < 0 || pairs.back().baseline_window < 0);
  }

  // Windows a candidate started now may still need: its pairs and the waits while its results are
  // awaited, then the decision's pairs and their waits.
  bool room_for_search_candidate() const {
    return plan_count() + 2 * o.search_pairs + 2 * o.decision_pairs + 2 * o.lookahead <= o.max_windows;
  }

  // A short window of the config before it, in no pair and never used: run while the current
  // candidate's results are awaited.
  void plan_wait() {
    const WindowRecord& before = windows.back();
    plan_window(before.plan.ordinal, before.plan.role, "wait", -1);
    windows.back().plan.steps = o.wait_steps;
  }

  int start_candidate(const Point& point, bool decision) {
    Candidate c;
    c.point = point;
    c.ordinal = space.space.ordinal_of(point);
    c.config = space.space.config_at(point);
    c.decision = decision;
    c.needed = decision ? o.decision_pairs : o.search_pairs;
    candidates.push_back(std::move(c));
    return static_cast<int>(candidates.size()) - 1;
  }

  void plan_next() {
    if (settled) {
      plan_window(*ordinal_of_decision(), decision == space.baseline ? WindowRole::kBaseline : WindowRole::kCandidate,
                  "settled", -1);
      windows.back().plan.settled = true;
      windows.back().plan.steps = 0;
      windows.back().plan.discard = 0;
      return;
    }
    if (pair_open()) {
      if (!candidates[static_cast<size_t>(pairs.back().candidate)].concluded) return plan_pair_window();
      pairs.back().abandoned = true;  // dropped after the pair's first window: its second is not needed
    }
    if (current >= 0) {  // its pairs first; then, while their results are awaited, waits
      const Candidate& c = candidates[static_cast<size_t>(current)];
      if (static_cast<int>(c.pairs.size()) < c.needed) return plan_pair(current);
      return plan_wait();
    }
    while (!search_done) {
      const auto next = descent->next();
      if (!next) {
        search_done = true;
        break;
      }
      const CommConfig config = space.space.config_at(*next);
      if (config == space.baseline) {
        descent->report(*next, 1.0);
        continue;
      }
      const auto known = measured_cost(config);
      if (known) {
        descent->report(*next, *known);
        continue;
      }
      if (!room_for_search_candidate()) {
        search_done = true;
        search_end = fmt::format("the search stopped at window {} of at most {}, keeping room for the decision's "
                                 "pairs",
                                 plan_count(), o.max_windows);
        break;
      }
      current = start_candidate(*next, false);
      return plan_pair(current);
    }
    // The search is over: the best point it measured is judged, unless it is the baseline.
    const auto best = best_measured();
    if (!best) {
      settle_on_baseline(candidates.empty()
                             ? "nothing to tune online: every switchable knob is pinned or has one value"
                             : fmt::format("no candidate measured more than {:.0f}% faster than it in the search "
                                           "({} config(s))",
                                           o.min_gain * 100, cost.size()));
      return plan_next();
    }
    current = start_candidate(space.space.point_at(*best), true);
    judged = *best;
    plan_pair(current);
  }

  std::optional<double> measured_cost(const CommConfig& config) const {
    for (const auto& [ordinal, c] : cost) {
      if (space.space.config_at(space.space.point_at(ordinal)) == config) return c;
    }
    return std::nullopt;
  }

  // The search's result, as the descent moves: from the baseline (cost 1) to a point measured later
  // only when it is clearly better (by min_gain); nullopt when none beat the baseline so.
  std::optional<size_t> best_measured() const {
    std::optional<size_t> best;
    double best_cost = 1.0;
    for (size_t ordinal : measured_order) {
      if (cost.at(ordinal) < (1 - o.min_gain) * best_cost) {
        best = ordinal;
        best_cost = cost.at(ordinal);
      }
    }
    return best;
  }

  std::optional<size_t> ordinal_of_decision() const {
    if (decision == space.baseline) return baseline_ordinal();
    return judged;
  }

  void settle_on_baseline(const std::string& why) {
    settled = true;
    decision = space.baseline;
    note = fmt::format("keep the job's own DDP ({}): {}", space.baseline.describe(), why);
    verdict = Verdict{};
    verdict.accepted = false;
    verdict.note = note;
  }

  const WindowRecord& window_at(int index) const { return windows[static_cast<size_t>(index)]; }
  bool pushed_window(int index) const { return index >= 0 && window_at(index).pushed; }

  // After each push: "clearly slower", and a candidate whose needed pairs all have results.
  void evaluate() {
    if (current < 0) return;
    Candidate& c = candidates[static_cast<size_t>(current)];
    if (!c.decision && !c.first_checked) {
      const int first = pairs[static_cast<size_t>(c.pairs.front())].candidate_window;
      if (pushed_window(first)) {
        c.first_checked = true;
        const auto base = latest_baseline(first);
        if (base) {
          const double ratio = median(window_at(first).step_times_s) / median(window_at(*base).step_times_s);
          if (ratio > 1 + o.slower_margin) {
            windows[static_cast<size_t>(first)].used = true;
            windows[static_cast<size_t>(*base)].used = true;
            dropped.push_back(fmt::format("{}: its first window's median {:.3f}x the baseline's", c.config.describe(),
                                          ratio));
            return conclude(c, ratio);
          }
        }
      }
    }
    std::vector<int> complete;
    for (int id : c.pairs) {
      const PairWindows& p = pairs[static_cast<size_t>(id)];
      if (pushed_window(p.candidate_window) && pushed_window(p.baseline_window)) complete.push_back(id);
    }
    if (static_cast<int>(complete.size()) < c.needed) return;
    std::vector<PairRun> runs;
    std::vector<double> candidate_steps;
    for (int id : complete) {
      const PairWindows& p = pairs[static_cast<size_t>(id)];
      windows[static_cast<size_t>(p.candidate_window)].used = true;
      windows[static_cast<size_t>(p.baseline_window)].used = true;
      PairRun run;
      run.candidate_first = p.candidate_first;
      run.candidate_steps_s = window_at(p.candidate_window).step_times_s;
      run.baseline_steps_s = window_at(p.baseline_window).step_times_s;
      candidate_steps.insert(candidate_steps.end(), run.candidate_steps_s.begin(), run.candidate_steps_s.end());
      runs.push_back(std::move(run));
    }
    if (c.decision) return judge_decision(c, std::move(runs));
    double log_sum = 0;
    for (const auto& run : runs) log_sum += std::log(pair_speedup(run.candidate_steps_s, run.baseline_steps_s));
    candidate_p50[c.ordinal] = median(candidate_steps);
    conclude(c, std::exp(-log_sum / static_cast<double>(runs.size())));
  }

  // The latest pushed baseline window up to `index`'s pair (its own pair's first).
  std::optional<int> latest_baseline(int index) const {
    std::optional<int> found;
    for (int i = 0; i < plan_count(); ++i) {
      const WindowRecord& w = window_at(i);
      if (!w.pushed || w.plan.role != WindowRole::kBaseline || w.pair < 0) continue;  // waits and settled: in no pair
      if (i < index || (w.pair == window_at(index).pair)) found = i;
    }
    return found;
  }

  void conclude(Candidate& c, double relative_cost) {
    c.concluded = true;
    cost[c.ordinal] = relative_cost;
    measured_order.push_back(c.ordinal);
    descent->report(c.point, relative_cost);
    current = -1;
  }

  void judge_decision(Candidate& c, std::vector<PairRun> runs) {
    c.concluded = true;
    current = -1;
    verdict = judge(c.config, runs, "", RuleOptions{0.05, o.seed, /*online=*/true});
    decision_pairs = std::move(runs);
    settled = true;
    decision = verdict.accepted ? c.config : space.baseline;
    note = verdict.note;
  }
};

OnlineTuner::OnlineTuner(OnlineSpace space, OnlineOptions options) : s_(std::make_unique<State>()) {
  auto check = [](const char* name, double value, double low, double high) {
    if (!(value >= low && value <= high)) {
      ACS_THROW(InvalidArgument, "online option {} = {} is out of range (accepted: {} to {})", name, value, low, high);
    }
  };
  check("window_steps", options.window_steps, 3, 10000);
  check("discard_steps", options.discard_steps, 0, 10000);
  check("search_pairs", options.search_pairs, 1, 100);
  check("decision_pairs", options.decision_pairs, 3, 100);
  check("slower_margin", options.slower_margin, 0, 10);
  check("min_gain", options.min_gain, 0, 0.5);
  check("lookahead", options.lookahead, 0, 2);
  check("wait_steps", options.wait_steps, 1, 10000);
  check("warmup_steps", options.warmup_steps, 0, 1e9);
  const int least = 2 * options.search_pairs + 2 * options.decision_pairs + 2 * options.lookahead;
  check("max_windows", options.max_windows, least, 1e6);
  State& s = *s_;
  s.space = std::move(space);
  s.o = std::move(options);
  StrategyOptions strategy;
  strategy.seed = s.o.seed;
  strategy.min_gain = s.o.min_gain;
  if (s.o.model) {
    const int per_node = s.o.nnodes > 0 && s.o.world_size > 0 ? s.o.world_size / s.o.nnodes : 0;
    strategy.order_by = model_forecast(*s.o.model, s.space.space, Scenario{1, s.o.nnodes, per_node});
  }
  s.descent = make_strategy("descent", s.space.space, strategy);
}

OnlineTuner::~OnlineTuner() = default;

WindowPlan OnlineTuner::window(int k) {
  State& s = *s_;
  if (k < 0 || k > s.plan_count()) {
    ACS_THROW(Error, "online window {} asked before window {} was planned", k, s.plan_count());
  }
  if (k == s.plan_count()) {
    if (!s.settled && s.pushed < k - s.o.lookahead) {
      ACS_THROW(Error, "online window {} needs the results of windows up to {} (lookahead {}); {} pushed", k,
                k - 1 - s.o.lookahead, s.o.lookahead, s.pushed);
    }
    s.plan_next();
  }
  return s.window_at(k).plan;
}

void OnlineTuner::push(int k, const std::vector<double>& step_times_s) {
  State& s = *s_;
  if (k != s.pushed || k >= s.plan_count()) {
    ACS_THROW(Error, "online push of window {}: the next window to push is {} ({} planned)", k, s.pushed,
              s.plan_count());
  }
  WindowRecord& w = s.windows[static_cast<size_t>(k)];
  if (w.plan.settled) ACS_THROW(Error, "online push of window {}: it runs the decision, no window is measured", k);
  if (static_cast<int>(step_times_s.size()) != w.plan.steps) {
    ACS_THROW(InvalidArgument, "online window {} ran {} steps, {} step times were pushed", k, w.plan.steps,
              step_times_s.size());
  }
  for (double t : step_times_s) {
    if (!(t > 0 && std::isfinite(t))) {
      ACS_THROW(InvalidArgument, "online window {}: step time {} is not a positive number of seconds", k, t);
    }
  }
  w.raw_step_times_s = step_times_s;
  w.step_times_s.assign(step_times_s.begin() + w.plan.discard, step_times_s.end());
  w.pushed = true;
  ++s.pushed;
  if (!s.settled) s.evaluate();
}

bool OnlineTuner::settled() const { return s_->settled; }

const CommConfig& OnlineTuner::decision() const {
  ACS_ENFORCE(s_->settled, "the online tuner has not settled");
  return s_->decision;
}

const std::string& OnlineTuner::note() const { return s_->note; }
std::optional<double> OnlineTuner::speedup() const { return s_->verdict.speedup; }
std::optional<double> OnlineTuner::ci_low() const { return s_->verdict.ci_low; }
std::optional<double> OnlineTuner::ci_high() const { return s_->verdict.ci_high; }
const std::vector<WindowRecord>& OnlineTuner::windows() const { return s_->windows; }
const OnlineSpace& OnlineTuner::space() const { return s_->space; }

int OnlineTuner::max_exploration_steps() const {
  return s_->o.max_windows * (s_->o.window_steps + s_->o.discard_steps);
}

int OnlineTuner::max_window_steps() const { return s_->o.window_steps + s_->o.discard_steps; }

nlohmann::json OnlineTuner::configs() const {
  nlohmann::json list = nlohmann::json::array();
  const SearchSpace& grid = s_->space.space;
  for (size_t i = 0; i < grid.size(); ++i) list.push_back(grid.config_at(grid.point_at(i)));
  return list;
}

StoredOnline store_online(Store& store, const OnlineTuner& tuner, const OnlineJob& job) {
  ACS_ENFORCE(tuner.settled(), "the online tuner has not settled: nothing to store");
  const nlohmann::json evidence = tuner.evidence();
  SessionRecord session;
  session.instance_type = job.key.instance_type;
  session.model_name = job.model_name;
  session.model_signature = job.key.model_signature;
  session.precision = job.key.precision;
  session.world_size = job.key.world_size;
  session.nnodes = job.key.nnodes;
  session.batch_size = job.batch_size;
  session.strategy = "descent";
  session.seed = evidence.at("seed").get<int64_t>();
  session.search_space_json = nlohmann::json(tuner.space().space).dump();
  session.options_json = nlohmann::json{{"online", evidence.at("online")}, {"settings", settings_in_environment()}}.dump();
  session.versions_json = job.versions.dump();
  session.kind = SessionKind::kOnline;
  StoredOnline out;
  out.session_id = store.create_session(session);
  for (const WindowRecord& w : tuner.windows()) {
    if (!w.pushed) continue;
    TrialRecord trial;
    trial.session_id = out.session_id;
    trial.ordinal = w.plan.index;
    trial.role = w.trial_role();
    trial.config_json = config_to_json(w.plan.config);
    trial.step_times_s = w.step_times_s;
    TrialMetrics metrics = metrics_from_steps(w.step_times_s, static_cast<int>(job.batch_size), w.plan.discard);
    if (w.pair >= 0) metrics.pair = w.pair;
    nlohmann::json m = metrics;
    m["online_window"] = w;  // the window as it ran: phase, pair, used, discarded steps
    trial.metrics_json = m.dump();
    store.add_trial(trial);
  }
  Decision d;
  d.key = job.key;
  d.model_name = job.model_name;
  d.config = tuner.decision();
  d.session_id = out.session_id;
  d.torch_version = job.torch_version;
  d.nccl_version = job.nccl_version;
  d.cuda_version = job.cuda_version;
  d.batch_size = job.batch_size;
  d.speedup = tuner.speedup();
  d.ci_low = tuner.ci_low();
  d.ci_high = tuner.ci_high();
  d.evidence_json = evidence.dump();
  d.note = tuner.note();
  if (const auto held = store.active_decision(job.key)) {
    const std::string_view kind = decision_kind(store, *held);
    if (kind != to_string(SessionKind::kOnline)) {
      out.inactive_because = fmt::format("decision #{} ({}) is active for this key", held->id, kind);
    }
  }
  out.active = out.inactive_because.empty();
  out.decision_id = store.add_decision(d, out.active);
  store.finish_session(out.session_id, SessionStatus::kDone);
  return out;
}

nlohmann::json OnlineTuner::evidence() const {
  const State& s = *s_;
  ACS_ENFORCE(s.settled, "the online tuner has not settled: no evidence yet");
  const CommConfig candidate =
      s.judged ? s.space.space.config_at(s.space.space.point_at(*s.judged)) : s.space.baseline;
  nlohmann::json search = {{"strategy", "descent"}, {"measured", s.cost.size()}};
  if (s.judged && s.candidate_p50.count(*s.judged)) {
    search["best_p50_s"] = s.candidate_p50.at(*s.judged);
    search["best_cost_s"] = s.candidate_p50.at(*s.judged);
  }
  if (!s.search_end.empty()) search["stopped"] = s.search_end;
  int exploration_steps = 0;
  // The decision runs from its first settled window; until that is planned, the next window is it.
  int64_t decision_from_step = s.o.warmup_steps;
  for (const auto& w : s.windows) {
    exploration_steps += w.plan.steps;
    if (w.plan.settled) break;
    decision_from_step = w.plan.first_step + w.plan.steps;
  }
  nlohmann::json j = {{"seed", s.o.seed},
                      {"method", kDecisionMethod},
                      {"candidate", candidate},
                      {"guard", nullptr},
                      {"search", search},
                      {"speedups", s.verdict.speedups},
                      {"online",
                       {{"baseline", s.space.baseline},
                        {"warmup_steps", s.o.warmup_steps},
                        {"window_steps", s.o.window_steps},
                        {"discard_steps", s.o.discard_steps},
                        {"search_pairs", s.o.search_pairs},
                        {"decision_pairs", s.o.decision_pairs},
                        {"slower_margin", s.o.slower_margin},
                        {"lookahead", s.o.lookahead},
                        {"wait_steps", s.o.wait_steps},
                        {"max_windows", s.o.max_windows},
                        {"windows", s.pushed},
                        {"exploration_steps", exploration_steps},
                        {"decision_from_step", decision_from_step},
                        {"ordered_by", s.o.model ? "the step model of a stored session" : "the descent's own order"},
                        {"dropped", s.dropped}}}};
  if (s.judged) {
    j["pairs"] = s.decision_pairs;
    if (!s.verdict.pair_speedups.empty()) j["pair_speedups"] = s.verdict.pair_speedups;
  }
  return j;
}

}  // namespace acspeed::tuner
