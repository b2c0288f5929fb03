#include "acspeed/decision_io.h"

#include <nlohmann/json.hpp>

#include "acspeed/error.h"

namespace acspeed {
namespace {
using nlohmann::json;

json optional_number(const std::optional<double>& value) { return value ? json(*value) : json(nullptr); }

template <typename T>
T field(const json& j, const char* key, size_t index) {
  if (!j.contains(key)) ACS_THROW(InvalidArgument, "decisions[{}] has no '{}' field", index, key);
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    ACS_THROW(InvalidArgument, "decisions[{}].{} has the wrong type: {}", index, key, j.at(key).dump());
  }
}

std::optional<double> optional_field(const json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<double>();
}
}  // namespace

std::string decisions_to_json(const std::vector<Decision>& decisions, int indent) {
  json list = json::array();
  for (const auto& d : decisions) {
    json evidence;
    try {
      evidence = json::parse(d.evidence_json);
    } catch (const json::exception&) {
      evidence = d.evidence_json;
    }
    list.push_back({{"id", d.id},
                    {"instance_type", d.key.instance_type},
                    {"model_signature", d.key.model_signature},
                    {"model_name", d.model_name},
                    {"precision", d.key.precision},
                    {"world_size", d.key.world_size},
                    {"nnodes", d.key.nnodes},
                    {"active", d.active},
                    {"config", json::parse(config_to_json(d.config))},
                    {"session_id", d.session_id ? json(*d.session_id) : json(nullptr)},
                    {"torch_version", d.torch_version},
                    {"nccl_version", d.nccl_version},
                    {"cuda_version", d.cuda_version},
                    {"batch_size", d.batch_size},
                    {"speedup", optional_number(d.speedup)},
                    {"ci_low", optional_number(d.ci_low)},
                    {"ci_high", optional_number(d.ci_high)},
                    {"evidence", evidence},
                    {"note", d.note},
                    {"created_at", d.created_at}});
  }
  json doc = {{"format", "acspeed-decisions"}, {"version", kDecisionsFormatVersion}, {"decisions", list}};
  return doc.dump(indent);
}

bool is_decisions_document(std::string_view text) {
  try {
    const auto j = json::parse(text);
    return j.is_object() && j.value("format", "") == "acspeed-decisions";
  } catch (const json::exception&) {
    return false;
  }
}

std::vector<Decision> decisions_from_json(std::string_view text) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    ACS_THROW(InvalidArgument, "not valid JSON: {}", e.what());
  }
  if (!doc.is_object() || doc.value("format", "") != "acspeed-decisions") {
    ACS_THROW(InvalidArgument, "not an acspeed decisions document (expected \"format\": \"acspeed-decisions\")");
  }
  const int version = doc.value("version", 0);
  if (version != kDecisionsFormatVersion) {
    ACS_THROW(InvalidArgument, "decisions document version {} is not supported (accepted: {})", version,
              kDecisionsFormatVersion);
  }
  if (!doc.contains("decisions") || !doc.at("decisions").is_array()) {
    ACS_THROW(InvalidArgument, "decisions document has no 'decisions' array");
  }
  std::vector<Decision> out;
  const auto& list = doc.at("decisions");
  for (size_t i = 0; i < list.size(); ++i) {
    const auto& j = list[i];
    Decision d;
    d.key.instance_type = field<std::string>(j, "instance_type", i);
    d.key.model_signature = field<std::string>(j, "model_signature", i);
    d.model_name = j.value("model_name", "");
    d.key.precision = field<std::string>(j, "precision", i);
    d.key.world_size = field<int64_t>(j, "world_size", i);
    d.key.nnodes = field<int64_t>(j, "nnodes", i);
    if (!j.contains("config")) ACS_THROW(InvalidArgument, "decisions[{}] has no 'config' field", i);
    try {
      d.config = config_from_json(j.at("config").dump());
    } catch (const InvalidArgument& e) {
      ACS_THROW(InvalidArgument, "decisions[{}].config: {}", i, e.what());
    }
    d.active = j.value("active", false);
    d.torch_version = j.value("torch_version", "");
    d.nccl_version = j.value("nccl_version", "");
    d.cuda_version = j.value("cuda_version", "");
    d.batch_size = j.value("batch_size", int64_t{0});
    d.speedup = optional_field(j, "speedup");
    d.ci_low = optional_field(j, "ci_low");
    d.ci_high = optional_field(j, "ci_high");
    d.evidence_json = j.contains("evidence") ? j.at("evidence").dump() : "{}";
    d.note = j.value("note", "");
    d.created_at = j.value("created_at", "");
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace acspeed
