// acspeed-tune explain: what `import acspeed` would apply here for a model, world size and node
// count, and why (the same lookup the training job runs).
#include <fmt/format.h>

#include "acspeed/error.h"
#include "acspeed/fingerprint.h"
#include "acspeed/gpu_sharing.h"
#include "acspeed/node_count.h"
#include "acspeed/precision.h"
#include "acspeed/resolve.h"
#include "acspeed/settings.h"
#include "acspeed/strings.h"
#include "acspeed/tuner/effective_speedup.h"
#include "acspeed/tuner/step_model.h"
#include "cli.h"

namespace acspeed::cli {
namespace {

// The step model of the decision's session (tuner/include/acspeed/tuner/step_model.h) for what would be applied.
void explain_prediction(const GlobalOptions& global, const Resolution& r) {
  if (!r.decision || !r.decision->session_id) {
    fmt::print("step model: no tuning session behind this config: no predicted step time\n");
    return;
  }
  auto store = open_store(global, false);
  const auto session = store->session(*r.decision->session_id);
  if (!session) {
    fmt::print("step model: session {} is no longer in the store: no predicted step time\n", *r.decision->session_id);
    return;
  }
  const tuner::StepModel model = tuner::session_model(*store, *session);
  const tuner::Prediction p = tuner::predict(model, r.config);
  if (!p.ok) {
    fmt::print("step model (session {}): not predicted: {}\n", session->id, p.why_not);
    return;
  }
  std::string measured;
  if (const auto* m = tuner::find_measured(model, r.config); m != nullptr && m->step_s > 0) {
    measured = fmt::format("; measured {} (efficiency {:.0f}%)", tuner::format_seconds(m->step_s),
                           100 * p.bound_s / m->step_s);
  }
  fmt::print("step model (session {}, {} node(s) as tuned): predicted step {}, bound {} (efficiency {:.0f}%){}\n",
             session->id, session->nnodes, tuner::format_seconds(p.step_s), tuner::format_seconds(p.bound_s),
             100 * p.bound_s / p.step_s, measured);
}

// Where the decision found came from (its kind: offline, online, imported), and the inactive
// online decisions of the same key: online tuning stores one inactive beside an active decision of
// another kind, and `configs activate` applies it.
void explain_kinds(const GlobalOptions& global, const DecisionKey& key, const Resolution& r) {
  auto store = open_store(global, false);
  if (!store->exists()) return;
  if (r.decision) {
    const std::string_view kind = decision_kind(*store, *r.decision);
    fmt::print("decision #{}: kind {}{}\n", r.decision->id, kind,
               kind == to_string(SessionKind::kOnline) ? fmt::format(" (tuned inside a training job, online session {})",
                                                                     *r.decision->session_id)
               : kind == to_string(SessionKind::kOffline) ? fmt::format(" (acspeed-tune session {})", *r.decision->session_id)
                                                          : " (no tuning session in this store: `configs import`)");
  }
  DecisionFilter filter;
  filter.instance_type = key.instance_type;
  filter.model = key.model_signature;
  for (const auto& d : store->decisions(filter)) {
    const bool same_key = d.key.model_signature == key.model_signature && d.key.world_size == key.world_size &&
                          d.key.nnodes == key.nnodes && d.key.gpus_shared == key.gpus_shared &&
                          (key.precision.empty() || d.key.precision == key.precision);
    if (!same_key || d.active || decision_kind(*store, d) != to_string(SessionKind::kOnline)) continue;
    fmt::print("inactive online decision #{} for this key ({}, precision {}{}): `acspeed-tune configs activate {}` "
               "would apply it\n",
               d.id, d.config.describe(), d.key.precision,
               d.speedup ? fmt::format(", {:.2f}x the job's own DDP", *d.speedup) : "", d.id);
  }
}

}  // namespace

int cmd_explain(const GlobalOptions& global, const std::vector<std::string>& args) {
  po::options_description options("explain options");
  options.add_options()("model", po::value<std::string>(), "model name as tuned (e.g. resnet50)")(
      "model-signature", po::value<std::string>(), "model signature (as `configs list` shows)")(
      "world-size", po::value<int64_t>()->required(), "total number of ranks")(
      "nnodes", po::value<int64_t>()->default_value(1), "number of nodes")(
      "precision", po::value<std::string>(),
      fmt::format("{} (default: ACSPEED_PRECISION, else any)", join(precision_names(), "|")).c_str())(
      "instance-type", po::value<std::string>(), "instance type (default: this machine's fingerprint)")(
      "share-gpus", "the job's ranks may share GPUs (default: ACSPEED_SHARE_GPUS); they do when a node runs more "
      "ranks than this machine's GPUs");
  po::variables_map vm;
  if (!parse_args("acspeed-tune explain (--model NAME | --model-signature SIG) --world-size N [--nnodes N] "
                  "[--precision P] [--instance-type KEY] [--share-gpus]",
                  options, {}, args, vm)) {
    return kExitOk;
  }
  ResolveRequest request;
  request.store_path = global.db_path;
  request.key.world_size = vm["world-size"].as<int64_t>();
  request.key.nnodes = vm["nnodes"].as<int64_t>();
  if (request.key.world_size < 1) ACS_THROW(InvalidArgument, "--world-size {} must be at least 1", request.key.world_size);
  validate_node_count(request.key.nnodes, request.key.world_size, "--nnodes");
  if (vm.count("precision")) {
    request.key.precision = to_string(parse_precision(vm["precision"].as<std::string>(), "--precision"));
  } else if (auto precision = setting_string("ACSPEED_PRECISION")) {
    request.key.precision = *precision;
  }
  const PythonVersions job = job_versions_of_python();  // exactly what `import acspeed` compares
  if (!job.problem.empty()) fmt::print(stderr, "note: {}: versions are not checked\n", job.problem);
  request.torch_version = job.versions.torch;
  request.nccl_version = job.versions.nccl;
  const auto fp = fingerprint({job.versions});
  request.key.instance_type = vm.count("instance-type") ? vm["instance-type"].as<std::string>() : fp.instance_type;
  request.key.gpus_shared = gpus_shared(vm.count("share-gpus") > 0 || setting_bool("ACSPEED_SHARE_GPUS"),
                                        request.key.world_size / request.key.nnodes,
                                        std::stoll(fp.details.at("gpu_count")));

  if (vm.count("model-signature")) {
    request.key.model_signature = vm["model-signature"].as<std::string>();
  } else if (vm.count("model")) {
    const std::string name = vm["model"].as<std::string>();
    auto store = open_store(global, false);
    for (const auto& d : store->decisions({std::nullopt, name, false})) {
      if (d.key.instance_type == request.key.instance_type || request.key.model_signature.empty()) {
        request.key.model_signature = d.key.model_signature;
      }
    }
    if (request.key.model_signature.empty()) {
      fmt::print("instance type: {}\nmodel {}: no decision stored for it in {} -> `import acspeed` keeps DDP "
                 "defaults (run `acspeed-tune --model {}` to tune it)\n",
                 request.key.instance_type, name, store->path(), name);
      return kExitOk;
    }
  } else {
    ACS_THROW(InvalidArgument, "give --model NAME or --model-signature SIG");
  }
  const Resolution r = resolve_config(request);
  fmt::print("instance type: {}{}\n", request.key.instance_type, fp.explicit_name ? " (ACSPEED_INSTANCE_TYPE)" : "");
  fmt::print("model signature: {}\nworld size {}, {} node(s), precision {}{}\n", request.key.model_signature,
             request.key.world_size, request.key.nnodes, request.key.precision.empty() ? "any" : request.key.precision,
             request.key.gpus_shared ? ", ranks sharing GPUs" : "");
  fmt::print("this job's versions (its torch's own): {}\n",
             job.problem.empty() ? describe(job.versions) : "unknown (" + job.problem + ")");
  fmt::print("source: {}\n{}\n", to_string(r.source), r.message);
  for (const auto& warning : r.warnings) fmt::print("warning: {}\n", warning);
  fmt::print("DDP knobs and hook: {}\nconfig: {}\n", r.config.describe(), config_to_json(r.config, 2));
  fmt::print("comm hook: {}\n", r.config.needs_comm_hook() ? "acspeed hook registered" : "none (DDP's built-in allreduce)");
  if (r.decision) {
    if (const auto speedups = tuner::speedups_of_evidence(r.decision->evidence_json)) {
      fmt::print("decision #{} speedups (effective = step speedup / step inflation): {}\n", r.decision->id,
                 speedups->describe());
    }
  }
  explain_kinds(global, request.key, r);
  explain_prediction(global, r);
  return r.source == ResolveSource::kError ? kExitFailure : kExitOk;
}

}  // namespace acspeed::cli
