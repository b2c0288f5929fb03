#include "decision_evidence.h"

#include <fmt/format.h>

namespace acspeed::tuner {

std::string guard_data(const TuneOptions& o) {
  return o.data.empty() ? "synthetic (fresh random inputs each step, labels from a fixed random teacher; no --data)"
                        : "--data " + o.data;
}

nlohmann::json decision_evidence(const TuneOptions& o, const Measured& best, const std::string& strategy,
                                 size_t measured) {
  nlohmann::json j = {
      {"seed", o.seed},
      {"method", kDecisionMethod},
      {"candidate", best.config},
      {"guard", best.metrics.guard},
      {"search",
       {{"strategy", strategy}, {"measured", measured}, {"best_p50_s", best.metrics.p50_s}, {"best_cost_s", best.ranking_cost}}}};
  if (o.compression_searched) j["data"] = guard_data(o);
  if (o.gpus_shared) {  // time-sliced GPUs: the measurements are not those of a GPU per rank
    j["gpus_shared"] = {{"gpus", o.gpus}, {"ranks_per_node", o.nproc_per_node},
                        {"device", fmt::format("local rank mod {}", o.gpus)}};
  }
  return j;
}

PairRun pair_of(bool candidate_first, const Measured& c, const Measured& b) {
  PairRun pair;
  pair.candidate_first = candidate_first;
  pair.candidate_steps_s = c.step_times_s;
  pair.baseline_steps_s = b.step_times_s;
  pair.candidate_loss = c.metrics.loss;
  pair.baseline_loss = b.metrics.loss;
  pair.baseline_loss_first = b.metrics.loss_first;
  return pair;
}

std::string add_bound_evidence(nlohmann::json& evidence, const StepModel& model, const CommConfig& config,
                               const Measured* measured) {
  const Prediction p = predict(model, config);
  if (!p.ok) return "";
  evidence["model"] = {{"bound_s", p.bound_s}, {"predicted_s", p.step_s}};
  // Its step, not its search cost (a compressed config's cost counts its step inflation).
  if (measured != nullptr && measured->status == "ok" && measured->metrics.p50_s > 0) {
    const double step = measured->metrics.p50_s;
    evidence["model"]["efficiency"] = p.bound_s / step;
    return fmt::format("; step {} against a bound of {} (efficiency {:.0f}%)", format_seconds(step),
                       format_seconds(p.bound_s), 100 * p.bound_s / step);
  }
  return fmt::format("; bound {}", format_seconds(p.bound_s));
}

}  // namespace acspeed::tuner
