#include "acspeed/resolve.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "acspeed/decision_io.h"
#include "acspeed/error.h"
#include "acspeed/fingerprint.h"
#include "acspeed/node_count.h"
#include "acspeed/settings.h"
#include "acspeed/strings.h"
#include "acspeed/utf8.h"
#include "config_file.h"

namespace acspeed {
namespace {

// The key as people read it; `model_name`: what the model was tuned as ("resnet18"), beside its signature.
std::string describe_key(const DecisionKey& key, const std::string& model_name = "") {
  const std::string model = model_name.empty() || model_name == key.model_signature
                                ? key.model_signature
                                : fmt::format("{} ({})", model_name, key.model_signature);
  return fmt::format("{}, model {}, {}, world size {}, {} node{}{}", key.instance_type, model,
                     key.precision.empty() ? "any precision" : key.precision, key.world_size, key.nnodes,
                     key.nnodes == 1 ? "" : "s", key.gpus_shared ? ", ranks sharing GPUs" : "");
}

bool known(const std::string& version) { return !version.empty() && version != "unknown"; }

// A version mismatch that makes a decision stale, or "" when it applies.
std::string version_mismatch(const Decision& d, const ResolveRequest& r) {
  if (!known(d.torch_version) && known(r.torch_version)) {
    return fmt::format("no recorded torch version (this job runs torch {})", r.torch_version);
  }
  if (known(d.torch_version) && known(r.torch_version) &&
      major_minor(d.torch_version) != major_minor(r.torch_version)) {
    return fmt::format("torch {} (this job runs torch {})", d.torch_version, r.torch_version);
  }
  if (known(d.nccl_version) && known(r.nccl_version) &&
      major_minor(d.nccl_version) != major_minor(r.nccl_version)) {
    return fmt::format("NCCL {} (this job runs NCCL {})", d.nccl_version, r.nccl_version);
  }
  return "";
}

Resolution from_file(const std::string& file, const ResolveRequest& request) {
  const std::string text = read_config_file(file);
  Resolution r;
  r.source = ResolveSource::kForced;
  r.applied = true;
  try {
    if (!is_decisions_document(text)) {
      r.config = config_from_json(text, &r.warnings);
      r.message = fmt::format("applied {} from ACSPEED_CONFIG={}", r.config.describe(), file);
      return r;
    }
    auto decisions = decisions_from_json(text);
    if (decisions.empty()) ACS_THROW(InvalidArgument, "it holds no decision");
    const Decision* chosen = &decisions.front();
    if (decisions.size() > 1) {
      chosen = nullptr;
      for (const auto& d : decisions) {
        if (d.key.model_signature == request.key.model_signature && d.key.world_size == request.key.world_size &&
            d.key.nnodes == request.key.nnodes && d.key.gpus_shared == request.key.gpus_shared) {
          chosen = &d;
          break;
        }
      }
      if (chosen == nullptr) {
        ACS_THROW(InvalidArgument, "it holds {} decisions and none for this job ({})", decisions.size(),
                  describe_key(request.key));
      }
    }
    r.config = chosen->config;
    r.decision = *chosen;
    r.message = fmt::format("applied {} from ACSPEED_CONFIG={} (tuned for {})", r.config.describe(), file,
                            describe_key(chosen->key, chosen->model_name));
    if (chosen->key.instance_type != request.key.instance_type) {
      r.warnings.push_back(fmt::format(
          "ACSPEED_CONFIG={} was tuned on instance type '{}', this is '{}': forced as asked", file,
          chosen->key.instance_type, request.key.instance_type));
    }
    if (chosen->key.gpus_shared != request.key.gpus_shared) {
      r.warnings.push_back(fmt::format("ACSPEED_CONFIG={} was tuned with ranks {}, this job's ranks {}: forced "
                                       "as asked", file, chosen->key.gpus_shared ? "sharing GPUs" : "on their own GPUs",
                                       request.key.gpus_shared ? "share GPUs" : "each have their own GPU"));
    }
  } catch (const InvalidArgument& e) {
    ACS_THROW(InvalidArgument, "ACSPEED_CONFIG={}: {}", file, e.what());
  }
  return r;
}

Resolution from_store(const ResolveRequest& request) {
  Resolution r;
  StoreOptions options;
  options.path = request.store_path;
  options.read_only = true;
  auto store = Store::open(options);
  if (!store->exists()) {
    r.source = ResolveSource::kNoStore;
    r.message = fmt::format("no acspeed store at {} (run acspeed-tune to tune this job)", store->path());
    return r;
  }
  const DecisionKey& key = request.key;
  std::optional<Decision> found;
  if (!key.precision.empty()) found = store->active_decision(key, /*any_precision=*/false);
  bool other_precision = false;
  if (!found) {
    found = store->active_decision(key, /*any_precision=*/true);
    other_precision = found.has_value() && !key.precision.empty();
  }
  if (!found) {
    r.source = ResolveSource::kNoEntry;
    std::set<std::string> elsewhere;
    for (const auto& d : store->decisions({std::nullopt, key.model_signature, true})) {
      if (d.key.instance_type != key.instance_type) elsewhere.insert(d.key.instance_type);
    }
    r.message = fmt::format("no stored decision for {}", describe_key(key));
    DecisionKey other_sharing = key;
    other_sharing.gpus_shared = !key.gpus_shared;
    if (const auto other = store->active_decision(other_sharing, /*any_precision=*/true)) {
      r.message += key.gpus_shared
                       ? fmt::format(" (decision #{} was tuned with a GPU per rank: it does not apply to ranks sharing "
                                     "GPUs)", other->id)
                       : fmt::format(" (decision #{} was tuned with ranks sharing GPUs: it applies only to jobs that "
                                     "share GPUs, ACSPEED_SHARE_GPUS=1 with more ranks per node than GPUs)", other->id);
    }
    if (!elsewhere.empty()) {
      r.message += fmt::format(" (this model has decisions for other instance types: {})",
                               join({elsewhere.begin(), elsewhere.end()}));
    }
    return r;
  }
  if (!found->config_error.empty()) {
    r.source = ResolveSource::kError;
    r.decision = found;
    r.message = fmt::format("decision #{} in store {} holds an invalid config ({}); delete it (`acspeed-tune "
                            "configs delete {}`) or re-tune", found->id, store->path(), found->config_error, found->id);
    return r;
  }
  if (auto stale = version_mismatch(*found, request); !stale.empty()) {
    r.source = ResolveSource::kVersionMismatch;
    r.decision = found;
    r.message = fmt::format("decision #{} for {} was tuned under {}; re-run acspeed-tune", found->id,
                            describe_key(found->key, found->model_name), stale);
    return r;
  }
  r.source = other_precision ? ResolveSource::kStoredOtherPrecision : ResolveSource::kStored;
  r.applied = !found->config.is_default();
  r.config = found->config;
  r.decision = found;
  const std::string other = other_precision
                                ? fmt::format(" (no decision for {}; using {})", key.precision, found->key.precision)
                                : "";
  r.message = r.applied ? fmt::format("applied decision #{} ({}) stored for {}{}", found->id, found->config.describe(),
                                      describe_key(found->key, found->model_name), other)
                        : fmt::format("decision #{} stored for {}{} keeps DDP defaults", found->id,
                                      describe_key(found->key, found->model_name), other);
  return r;
}

// What the decisions that apply say about the instance knobs: one value, or a disagreement.
InstanceKnobs agreed_knobs(const std::vector<const Decision*>& decisions, const std::string& where) {
  InstanceKnobs k;
  std::map<std::string, std::vector<int64_t>> by_value;  // "2x4" -> decision ids
  for (const Decision* d : decisions) {
    by_value[to_string(d->config.nccl_sockets)].push_back(d->id);
    k.decision_ids.push_back(d->id);
  }
  if (by_value.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [value, ids] : by_value) {
      std::vector<std::string> named;
      for (int64_t id : ids) named.push_back(fmt::format("#{}", id));
      parts.push_back(fmt::format("{} {}", value == "0" ? "NCCL's choice" : value, join(named)));
    }
    k.source = ResolveSource::kDisagree;
    k.message = fmt::format("NCCL sockets: the decisions for {} disagree ({}): none set, NCCL chooses; delete or "
                            "re-tune the ones that should not apply, or pin ACSPEED_NCCL_SOCKETS",
                            where, join(parts, "; "));
    return k;
  }
  k.nccl_sockets = decisions.front()->config.nccl_sockets;
  return k;
}

// The resolution with its message and warnings made well-formed UTF-8: they quote what the user gave
// (a file's bytes, a path) and travel to Python, which refuses anything else.
Resolution printable(Resolution r) {
  r.message = utf8_escaped(r.message);
  for (auto& warning : r.warnings) warning = utf8_escaped(warning);
  return r;
}

}  // namespace

std::string_view to_string(ResolveSource source) {
  switch (source) {
    case ResolveSource::kDisabled: return "disabled";
    case ResolveSource::kForced: return "forced";
    case ResolveSource::kStored: return "stored";
    case ResolveSource::kStoredOtherPrecision: return "stored_other_precision";
    case ResolveSource::kNoEntry: return "no_entry";
    case ResolveSource::kVersionMismatch: return "version_mismatch";
    case ResolveSource::kNoStore: return "no_store";
    case ResolveSource::kError: return "error";
    case ResolveSource::kPinned: return "pinned";
    case ResolveSource::kDisagree: return "disagree";
  }
  return "error";
}

Resolution resolve_config(const ResolveRequest& given) {
  Resolution r;
  ResolveRequest request = given;
  try {
    if (setting_bool("ACSPEED_DISABLE")) {
      r.source = ResolveSource::kDisabled;
      r.message = "acspeed is disabled (ACSPEED_DISABLE=1): DDP runs untouched";
      return r;
    }
    if (request.key.nnodes == 0) request.key.nnodes = node_count(request.key.world_size);
    if (auto file = setting_string("ACSPEED_CONFIG")) {
      r = from_file(*file, request);
    } else {
      r = from_store(request);
    }
    r.pinned = apply_env_pins(r.config);
    if (!r.pinned.empty()) {
      const bool changes = r.applied || !r.config.is_default();  // a pin to DDP's own value changes nothing
      r.message = r.applied  ? fmt::format("{}; pinned by environment: {} -> {}", r.message, join(r.pinned),
                                           r.config.describe())
                  : changes ? fmt::format("applied {} pinned by environment ({}); {}", r.config.describe(),
                                          join(r.pinned), r.message)
                            : fmt::format("{}; pinned by environment: {} (DDP defaults)", r.message, join(r.pinned));
      r.applied = changes;
    }
  } catch (const std::exception& e) {  // Error, and anything else: the promise is never to throw
    Resolution failed;
    failed.source = ResolveSource::kError;
    failed.message = fmt::format("{}{}", dynamic_cast<const Error*>(&e) ? "" : "internal error: ", e.what());
    return printable(std::move(failed));
  }
  return printable(std::move(r));
}

namespace {

// resolve_instance_knobs without its promise: throws what goes wrong.
InstanceKnobs instance_knobs(InstanceKnobsRequest request) {
  InstanceKnobs k;
  if (setting_bool("ACSPEED_DISABLE")) return k;
  if (request.nnodes == 0) request.nnodes = node_count(request.world_size);
  if (const auto pin = setting_string("ACSPEED_NCCL_SOCKETS")) {
    k.source = ResolveSource::kPinned;
    k.nccl_sockets = parse_nccl_sockets("ACSPEED_NCCL_SOCKETS", *pin);
    k.message = fmt::format("NCCL sockets {} pinned by ACSPEED_NCCL_SOCKETS", to_string(k.nccl_sockets));
  } else if (const auto file = setting_string("ACSPEED_CONFIG")) {
    const std::string text = read_config_file(*file);
    std::vector<Decision> decisions;
    try {
      if (!is_decisions_document(text)) {
        decisions.emplace_back().config = config_from_json(text);
      } else {
        for (auto& d : decisions_from_json(text)) {
          if (d.key.nnodes == request.nnodes) decisions.push_back(std::move(d));
        }
      }
    } catch (const InvalidArgument& e) {
      ACS_THROW(InvalidArgument, "ACSPEED_CONFIG={}: {}", *file, e.what());
    }
    if (decisions.empty()) return k;
    std::vector<const Decision*> all;
    for (const auto& d : decisions) all.push_back(&d);
    k = agreed_knobs(all, fmt::format("{} node(s) in ACSPEED_CONFIG={}", request.nnodes, *file));
    if (k.source == ResolveSource::kDisagree || !k.nccl_sockets) return k;
    k.source = ResolveSource::kForced;
    k.message = fmt::format("NCCL sockets {} from ACSPEED_CONFIG={}", to_string(k.nccl_sockets), *file);
  } else {
    StoreOptions options;
    options.path = request.store_path;
    options.read_only = true;
    auto store = Store::open(options);
    if (!store->exists()) return k;
    DecisionFilter filter;
    filter.active_only = true;
    if (!request.instance_type.empty()) filter.instance_type = request.instance_type;
    const auto decisions = store->decisions(filter);
    const auto here = [&](const Decision& d) {
      return d.key.nnodes == request.nnodes && d.key.gpus_shared == request.gpus_shared;
    };
    // Fingerprinting (GPU libraries, sysfs) only when a decision for this node count sets a knob.
    if (std::none_of(decisions.begin(), decisions.end(),
                     [&](const Decision& d) { return here(d) && d.config.nccl_sockets.has_value(); })) {
      return k;
    }
    if (request.instance_type.empty()) request.instance_type = fingerprint().instance_type;
    ResolveRequest versions;
    versions.torch_version = request.torch_version;
    versions.nccl_version = request.nccl_version;
    std::vector<const Decision*> applying;
    for (const auto& d : decisions) {
      if (here(d) && d.key.instance_type == request.instance_type && d.config_error.empty() &&
          version_mismatch(d, versions).empty()) {
        applying.push_back(&d);
      }
    }
    if (applying.empty()) return k;
    const std::string where = fmt::format("{} with {} node(s)", request.instance_type, request.nnodes);
    k = agreed_knobs(applying, where);
    if (k.source == ResolveSource::kDisagree || !k.nccl_sockets) return k;
    k.source = ResolveSource::kStored;
    std::vector<std::string> ids;
    for (int64_t id : k.decision_ids) ids.push_back(fmt::format("#{}", id));
    k.message = fmt::format("NCCL sockets {} from decision{} {} for {}", to_string(k.nccl_sockets),
                            ids.size() == 1 ? "" : "s", join(ids), where);
  }
  if (k.nccl_sockets) k.environment = nccl_socket_variables(*k.nccl_sockets);
  return k;
}

}  // namespace

InstanceKnobs resolve_instance_knobs(const InstanceKnobsRequest& request) {
  InstanceKnobs k;
  try {
    k = instance_knobs(request);
  } catch (const std::exception& e) {  // the promise is never to throw
    k = InstanceKnobs{};
    k.source = ResolveSource::kError;
    k.message = fmt::format("{}{}; NCCL sockets left to NCCL", dynamic_cast<const Error*>(&e) ? "" : "internal error: ",
                            e.what());
  }
  k.message = utf8_escaped(k.message);  // it quotes what the user gave; Python takes only UTF-8
  return k;
}

}  // namespace acspeed
