#include "resume.h"

#include <algorithm>

#include <fmt/format.h>

#include "acspeed/error.h"
#include "acspeed/tuner/statistics.h"

namespace acspeed::tuner {
namespace {

double step_of(const TrialRecord& t) {
  if (t.status != "ok" || t.step_times_s.empty()) return kFailedCost;
  return median(t.step_times_s);
}

}  // namespace

ResumedSession resume_session(const Store& store, int64_t id, const WorkerHello& hello,
                              const std::function<void(const std::string&)>& note) {
  const auto record = store.session(id);
  if (!record) ACS_THROW(InvalidArgument, "--resume {}: no such session in {}", id, store.path());
  if (record->model_signature != hello.model_signature || record->world_size != hello.world_size) {
    ACS_THROW(Error, "--resume {}: the session tuned model signature {} at world size {}, these workers have {} at {}",
              id, record->model_signature, record->world_size, hello.model_signature, hello.world_size);
  }
  ResumedSession resumed;
  resumed.session_id = record->id;
  const auto stored = store.trials(resumed.session_id);
  int reused = 0;
  resumed.model_trials = model_trials(stored);
  for (const auto& t : stored) {
    resumed.next_ordinal = std::max(resumed.next_ordinal, t.ordinal + 1);
    const bool pair_trial = t.role == "candidate" || t.role == "baseline";
    if (t.role != "search" && !pair_trial) continue;
    Measured m;
    m.ordinal = t.ordinal;
    try {
      m.config = config_from_json(t.config_json);
      m.metrics = metrics_from_json(t.metrics_json);
    } catch (const InvalidArgument& e) {
      note(fmt::format("  stored trial {} is unreadable ({}): its configuration is measured again", t.ordinal,
                       e.what()));
      continue;
    }
    if (t.status == "ok" && !m.metrics.finite) {
      note(fmt::format("  stored trial {} does not say whether its losses stayed finite: measured again", t.ordinal));
      continue;
    }
    m.status = t.status;
    m.error = t.error;
    m.step_s = t.status == "ok" && !*m.metrics.finite ? kFailedCost : step_of(t);
    m.ranking_cost = m.step_s;  // a compressed config's is the guard's, once it has judged it again (guard.h)
    m.step_times_s = t.step_times_s;
    if (pair_trial) {
      // One run of a decision pair; the decision reuses a pair whose two runs were both stored.
      if (m.metrics.pair) resumed.pair_trials.push_back({*m.metrics.pair, t.role, std::move(m)});
      continue;
    }
    const bool known = std::any_of(resumed.search.begin(), resumed.search.end(),
                                   [&](const Measured& s) { return s.config == m.config; });
    if (!known) resumed.search.push_back(std::move(m));
    ++reused;
  }
  note(fmt::format("resuming session {}: {} search trial(s) already measured are reused", resumed.session_id,
                   reused));
  return resumed;
}

bool stored_pair(const std::vector<PairTrial>& stored, int index, const CommConfig& candidate, Measured runs[2]) {
  const Measured* found[2] = {nullptr, nullptr};
  for (const auto& t : stored) {
    if (t.pair != index) continue;
    if (t.role == "candidate" && t.run.config == candidate) found[0] = &t.run;
    if (t.role == "baseline" && t.run.config.is_default()) found[1] = &t.run;
  }
  if (found[0] == nullptr || found[1] == nullptr) return false;
  runs[0] = *found[0];
  runs[1] = *found[1];
  return true;
}

}  // namespace acspeed::tuner
