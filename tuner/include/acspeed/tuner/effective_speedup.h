// The decision's speedups side by side: the step speedup of the alternated pairs, the step inflation
// (inflation.h) and the effective speedup = step speedup / inflation (decision_rule.h decides on
// it). Stored in a decision's evidence under "speedups"; the decision line, `acspeed-tune explain`
// and every report format show describe().
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "acspeed/tuner/inflation.h"

namespace acspeed::tuner {

struct EffectiveSpeedup {
  std::optional<double> step, step_low, step_high;  // geometric mean of the pairs and its 95% interval
  Inflation inflation = no_inflation();
  // step / inflation estimate, and step_low / inflation high (0 when that upper end is unbounded);
  // absent when the inflation is infinite or unmeasurable, or there is no step speedup.
  std::optional<double> effective, effective_low;
  double bar = 1;  // what effective_low had to exceed (decision_rule.h)

  // "step 2.999x [2.900, 3.100], inflation 1.40x [1.20, 1.60], effective 2.142x (lower end 1.813)";
  // "-" for what is missing.
  std::string describe() const;
};

// Fills effective and effective_low from step, step_low and inflation.
EffectiveSpeedup effective_speedup(std::optional<double> step, std::optional<double> step_low,
                                   std::optional<double> step_high, const Inflation& inflation, double bar = 1);

// Evidence form: step_speedup {estimate, ci_low, ci_high}, inflation, effective_speedup {estimate,
// low}, bar. from_json reads it back.
void to_json(nlohmann::json& j, const EffectiveSpeedup& s);
void from_json(const nlohmann::json& j, EffectiveSpeedup& s);

// The "speedups" of a decision's evidence (Decision::evidence_json); nullopt for a decision stored
// without them (before they existed) or evidence that does not parse.
std::optional<EffectiveSpeedup> speedups_of_evidence(const std::string& evidence_json);

}  // namespace acspeed::tuner
