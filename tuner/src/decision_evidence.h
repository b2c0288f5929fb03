// The evidence a decision is stored with (Decision::evidence_json, read by `configs show` and the
// reports): the session's seed and method, the candidate with its convergence-guard verdict, the
// search's summary, each alternated pair (decision_rule.h), the pairs' speedups, and how far the
// chosen config is from the step model's bound (step_model.h).
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "acspeed/tuner/session.h"
#include "acspeed/tuner/step_model.h"
#include "decision_rule.h"
#include "measured.h"

namespace acspeed::tuner {

// What the convergence guard's trajectories trained on ("--data pkg.module:function", or synthetic),
// for the guard's and the decision's evidence, the plan and the reports.
std::string guard_data(const TuneOptions& options);

// The evidence known before any pair runs: seed, method, candidate, guard, search summary (with
// --compression, what the guard's trajectories trained on).
nlohmann::json decision_evidence(const TuneOptions& options, const Measured& best, const std::string& strategy,
                                 size_t measured);

// Why a pair's runs cannot make a pair: "the candidate failed in pair N: ..." or the baseline's
// failure; "" when both are ok.
std::string pair_failure(int pair, const Measured& candidate, const Measured& baseline);

// A pair from its two runs, both ok (steps and losses).
PairRun pair_of(bool candidate_first, const Measured& candidate, const Measured& baseline);

// Adds the step model's bound for the decided `config` to `evidence` (with its efficiency when
// `measured`, its search measurement, is ok); returns the decision line's text for it ("" when
// the model cannot bound it).
std::string add_bound_evidence(nlohmann::json& evidence, const StepModel& model, const CommConfig& config,
                               const Measured* measured);

}  // namespace acspeed::tuner
