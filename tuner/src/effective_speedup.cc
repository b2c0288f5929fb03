#include "acspeed/tuner/effective_speedup.h"

#include <fmt/format.h>

#include "acspeed/error.h"

namespace acspeed::tuner {

EffectiveSpeedup effective_speedup(std::optional<double> step, std::optional<double> step_low,
                                   std::optional<double> step_high, const Inflation& inflation, double bar) {
  EffectiveSpeedup s;
  s.step = step;
  s.step_low = step_low;
  s.step_high = step_high;
  s.inflation = inflation;
  s.bar = bar;
  if (step && step_low && inflation.kind == InflationKind::kMeasured) {
    s.effective = *step / inflation.estimate;
    s.effective_low = inflation.finite_upper() ? *step_low / inflation.high : 0.0;
  }
  return s;
}

std::string EffectiveSpeedup::describe() const {
  const std::string step_text = step && step_low && step_high
                                    ? fmt::format("{:.3f}x [{:.3f}, {:.3f}]", *step, *step_low, *step_high)
                                    : std::string("-");
  const std::string effective_text =
      effective ? fmt::format("{:.3f}x (lower end {:.3f})", *effective, effective_low.value_or(0)) : std::string("-");
  return fmt::format("step {}, inflation {}, effective {}", step_text, inflation.describe(), effective_text);
}

void to_json(nlohmann::json& j, const EffectiveSpeedup& s) {
  j = {{"inflation", s.inflation}, {"bar", s.bar}};
  if (s.step && s.step_low && s.step_high) {
    j["step_speedup"] = {{"estimate", *s.step}, {"ci_low", *s.step_low}, {"ci_high", *s.step_high}};
  }
  if (s.effective) j["effective_speedup"] = {{"estimate", *s.effective}, {"low", s.effective_low.value_or(0)}};
}

void from_json(const nlohmann::json& j, EffectiveSpeedup& s) {
  if (!j.is_object()) ACS_THROW(InvalidArgument, "speedups evidence is not a JSON object: {}", j.dump());
  s = EffectiveSpeedup{};
  if (j.contains("step_speedup")) {
    const auto& step = j.at("step_speedup");
    s.step = step.at("estimate").get<double>();
    s.step_low = step.at("ci_low").get<double>();
    s.step_high = step.at("ci_high").get<double>();
  }
  if (j.contains("inflation")) s.inflation = j.at("inflation").get<Inflation>();
  if (j.contains("effective_speedup")) {
    s.effective = j.at("effective_speedup").at("estimate").get<double>();
    s.effective_low = j.at("effective_speedup").at("low").get<double>();
  }
  s.bar = j.value("bar", 1.0);
}

std::optional<EffectiveSpeedup> speedups_of_evidence(const std::string& evidence_json) {
  const auto j = nlohmann::json::parse(evidence_json, nullptr, false);
  if (!j.is_object() || !j.contains("speedups")) return std::nullopt;
  try {
    return j.at("speedups").get<EffectiveSpeedup>();
  } catch (const std::exception&) {  // a malformed entry: the report shows what else it has
    return std::nullopt;
  }
}

}  // namespace acspeed::tuner
