#include "acspeed/decision_io.h"

#include <nlohmann/json.hpp>

#include "acspeed/error.h"
#include "acspeed/json_io.h"
#include "acspeed/node_count.h"
#include "acspeed/precision.h"

namespace acspeed {
namespace {
using nlohmann::json;

json optional_number(const std::optional<double>& value) { return value ? json(*value) : json(nullptr); }

const json& document_decisions(const json& doc) {
  if (!doc.is_object() || doc.value("format", json()) != "acspeed-decisions") {
    ACS_THROW(InvalidArgument, "not an acspeed decisions document (expected \"format\": \"acspeed-decisions\")");
  }
  const auto version = doc.find("version");
  if (version == doc.end() || !version->is_number_integer() || *version != kDecisionsFormatVersion) {
    ACS_THROW(InvalidArgument, "decisions document version {} is not supported (accepted: {})",
              version == doc.end() ? "(none)" : json_io::shown(*version), kDecisionsFormatVersion);
  }
  const auto list = doc.find("decisions");
  if (list == doc.end() || !list->is_array()) ACS_THROW(InvalidArgument, "decisions document has no 'decisions' array");
  return *list;
}

}  // namespace

void to_json(json& j, const Decision& d) {
  if (!d.config_error.empty()) {
    ACS_THROW(StoreError, "decision {} holds an invalid config ({}): delete it (`acspeed-tune configs delete {}`) "
              "or leave it out", d.id, d.config_error, d.id);
  }
  json evidence = json::parse(d.evidence_json, nullptr, /*allow_exceptions=*/false);
  if (evidence.is_discarded()) evidence = d.evidence_json;
  j = {{"id", d.id},
       {"instance_type", d.key.instance_type},
       {"model_signature", d.key.model_signature},
       {"model_name", d.model_name},
       {"precision", d.key.precision},
       {"world_size", d.key.world_size},
       {"nnodes", d.key.nnodes},
       {"gpus_shared", d.key.gpus_shared},
       {"active", d.active},
       {"config", d.config},
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
       {"created_at", d.created_at}};
}

void from_json(const json& j, Decision& d) {
  using json_io::read;
  using json_io::required;
  json_io::require_object(j, "a decision");
  d = Decision{};
  d.key.instance_type = required<std::string>(j, "instance_type");
  d.key.model_signature = required<std::string>(j, "model_signature");
  d.key.precision = std::string(to_string(parse_precision(required<std::string>(j, "precision"), "'precision'")));
  d.key.world_size = required<int64_t>(j, "world_size");
  d.key.nnodes = required<int64_t>(j, "nnodes");
  validate_node_count(d.key.nnodes, d.key.world_size, "'nnodes'");
  read(j, "gpus_shared", d.key.gpus_shared);  // absent in documents from before it existed: not shared
  d.config = required<CommConfig>(j, "config");
  // A decision is applied only under the torch it was tuned with: without one it could not be checked.
  d.torch_version = required<std::string>(j, "torch_version");
  if (d.torch_version.empty()) {
    ACS_THROW(InvalidArgument, "'torch_version' is empty: the version check of `import acspeed` needs the torch "
              "version the decision was tuned under");
  }
  read(j, "model_name", d.model_name);
  read(j, "active", d.active);
  read(j, "nccl_version", d.nccl_version);
  read(j, "cuda_version", d.cuda_version);
  read(j, "batch_size", d.batch_size);
  read(j, "speedup", d.speedup);
  read(j, "ci_low", d.ci_low);
  read(j, "ci_high", d.ci_high);
  read(j, "note", d.note);
  read(j, "created_at", d.created_at);
  if (const auto evidence = j.find("evidence"); evidence != j.end()) d.evidence_json = evidence->dump();
}

std::string decisions_to_json(const std::vector<Decision>& decisions, int indent) {
  const json doc = {{"format", "acspeed-decisions"}, {"version", kDecisionsFormatVersion}, {"decisions", decisions}};
  return doc.dump(indent);
}

bool is_decisions_document(std::string_view text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.value("format", json()) == "acspeed-decisions";
}

std::vector<Decision> decisions_from_json(std::string_view text) {
  const json doc = json_io::parse(text, "the document");
  const json& list = document_decisions(doc);
  std::vector<Decision> out;
  for (size_t i = 0; i < list.size(); ++i) {
    try {
      out.push_back(list[i].get<Decision>());
    } catch (const InvalidArgument& e) {
      ACS_THROW(InvalidArgument, "decisions[{}]: {}", i, e.what());
    }
  }
  return out;
}

}  // namespace acspeed
