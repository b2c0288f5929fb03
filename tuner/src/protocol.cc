#include "protocol.h"

#include <nlohmann/json.hpp>

#include "acspeed/error.h"
#include "acspeed/json_io.h"
#include "acspeed/roles_and_statuses.h"

namespace acspeed::tuner {
namespace {

using nlohmann::json;

// The metrics a worker measures (the rest come from the step times).
constexpr const char* kWorkerMeasured[] = {
    metric::kLossFirst,      metric::kLoss,           metric::kLosses,         metric::kFinite,
    metric::kRebuildS,       metric::kComputeS,       metric::kCommS,          metric::kExposedCommS,
    metric::kProbe,          metric::kBucketCount,    metric::kBucketBytes,    metric::kForwardS,
    metric::kOptimizerS,     metric::kWarmupSteps,    metric::kCompressionS,   metric::kFidelityCosine,
    metric::kFidelityNormError, metric::kFidelityStepCosineMin, metric::kFidelitySteps, metric::kCpuFloorS,
    metric::kTrajectory,     metric::kTrajectoryFinite, metric::kFidelityS, metric::kTrajectoryS};

json parse_message(const std::string& line) {
  const json j = json::parse(line, nullptr, false);
  if (!j.is_object()) ACS_THROW(Error, "protocol: not a JSON object: '{}'", line.substr(0, 200));
  if (!j.contains("v") || !j["v"].is_number_integer()) {
    ACS_THROW(Error, "protocol: message without a version: '{}'", line.substr(0, 200));
  }
  if (j["v"] != kProtocolVersion) {
    ACS_THROW(Error, "protocol: message version {} but this tuner speaks version {} (worker and tuner from different "
              "builds?)", j["v"].dump(), kProtocolVersion);
  }
  if (!j.contains("type") || !j["type"].is_string()) ACS_THROW(Error, "protocol: message without a type: '{}'", line);
  return j;
}

// `body` with the envelope.
std::string message(const char* type, json body) {
  body["v"] = kProtocolVersion;
  body["type"] = type;
  return body.dump();
}

// The body of a message as T; a missing or mistyped field is an Exception naming the message (an
// Error from the workers; an InvalidArgument in the tuner's requests, which carry the user's config).
template <typename T, typename Exception = Error>
T body_of(const json& j) {
  try {
    return j.get<T>();
  } catch (const InvalidArgument& e) {
    ACS_THROW(Exception, "protocol: '{}' message: {}", j["type"].get<std::string>(), e.what());
  }
}

}  // namespace

void to_json(json& j, const WorkerHello& h) {
  j = {{"world_size", h.world_size},       {"nnodes", h.nnodes},
       {"local_world_size", h.local_world_size},
       {"backend", h.backend},             {"device", h.device},
       {"model", h.model},                 {"model_signature", h.model_signature},
       {"param_count", h.param_count},     {"param_bytes", h.param_bytes},
       {"torch_version", h.torch_version}, {"nccl_version", h.nccl_version},
       {"cuda_version", h.cuda_version},   {"torch_nccl_version", h.torch_nccl_version},
       {"torch_cuda_version", h.torch_cuda_version}, {"process_group", h.process_group},
       {"batch_size", h.batch_size},
       {"precision", h.precision},         {"probe", h.probe},
       {"gradients", h.gradients}};
}

void from_json(const json& j, WorkerHello& h) {
  using json_io::read;
  using json_io::required;
  h.world_size = required<int>(j, "world_size");
  h.nnodes = required<int>(j, "nnodes");
  h.local_world_size = required<int>(j, "local_world_size");
  h.backend = required<std::string>(j, "backend");
  h.device = required<std::string>(j, "device");
  h.model = required<std::string>(j, "model");
  h.model_signature = required<std::string>(j, "model_signature");
  h.param_count = required<int64_t>(j, "param_count");
  h.param_bytes = required<int64_t>(j, "param_bytes");
  h.torch_version = required<std::string>(j, "torch_version");
  read(j, "nccl_version", h.nccl_version);
  read(j, "cuda_version", h.cuda_version);
  read(j, "torch_nccl_version", h.torch_nccl_version);
  read(j, "torch_cuda_version", h.torch_cuda_version);
  read(j, "process_group", h.process_group);
  h.batch_size = required<int>(j, "batch_size");
  h.precision = required<std::string>(j, "precision");
  read(j, "probe", h.probe);
  read(j, "gradients", h.gradients);
}

void from_json(const json& j, WorkerFatal& f) {
  f.error = json_io::required<std::string>(j, "error");
  json_io::read(j, "usage", f.usage);
}

void to_json(json& j, const TrialRequest& r) {
  j = {{"id", r.id}, {"config", r.config}, {"warmup", r.warmup}, {"steps", r.steps}};
  if (r.mode != TrialMode::kDdp) j["mode"] = to_string(r.mode);
  if (r.fidelity_steps > 0) j["fidelity_steps"] = r.fidelity_steps;
  if (r.trajectory_steps > 0) j["trajectory_steps"] = r.trajectory_steps;
}

std::string_view to_string(TrialMode mode) {
  switch (mode) {
    case TrialMode::kDdp:
      return "ddp";
    case TrialMode::kComputeOnly:
      return "compute";
    case TrialMode::kHooked:
      return "hooked";
  }
  return "ddp";
}

void from_json(const json& j, TrialRequest& r) {
  r.id = json_io::required<int64_t>(j, "id");
  r.config = json_io::required<CommConfig>(j, "config");
  r.warmup = json_io::required<int>(j, "warmup");
  r.steps = json_io::required<int>(j, "steps");
  json_io::read(j, "fidelity_steps", r.fidelity_steps);
  if (r.fidelity_steps < 0) ACS_THROW(InvalidArgument, "fidelity_steps {} is negative (0: none, > 0: check steps)",
                                      r.fidelity_steps);
  json_io::read(j, "trajectory_steps", r.trajectory_steps);
  if (r.trajectory_steps < 0) {
    ACS_THROW(InvalidArgument, "trajectory_steps {} is negative (0: none, > 0: steps)", r.trajectory_steps);
  }
  std::string mode = "ddp";
  json_io::read(j, "mode", mode);
  for (TrialMode m : {TrialMode::kDdp, TrialMode::kComputeOnly, TrialMode::kHooked}) {
    if (mode == to_string(m)) {
      r.mode = m;
      return;
    }
  }
  ACS_THROW(InvalidArgument, "trial mode '{}' is not one of ddp, compute, hooked", mode);
}

void to_json(json& j, const TrialReply& r) {
  j = {{"id", r.id}, {"status", to_string(r.ok ? TrialStatus::kOk : TrialStatus::kFailed)}};
  if (!r.ok) {
    j["error"] = r.error;
    return;
  }
  j["step_times_s"] = r.step_times_s;
  const json measured = r.measured;
  for (const char* key : kWorkerMeasured) {
    if (measured.contains(key)) j[key] = measured[key];
  }
}

void from_json(const json& j, TrialReply& r) {
  r.id = json_io::required<int64_t>(j, "id");
  const auto text = json_io::required<std::string>(j, "status");
  const TrialStatus status = parse_trial_status(text);
  // A worker's trial ends or fails; only the tuner times one out.
  if (status == TrialStatus::kTimeout) ACS_THROW(InvalidArgument, "a worker's result status is ok or failed, not '{}'", text);
  r.ok = status == TrialStatus::kOk;
  if (!r.ok) {
    r.error = json_io::required<std::string>(j, "error");
    return;
  }
  r.step_times_s = json_io::required<std::vector<double>>(j, "step_times_s");
  if (r.step_times_s.empty()) ACS_THROW(InvalidArgument, "result {} has no step times", r.id);
  json measured = json::object();
  for (const char* key : kWorkerMeasured) {
    if (j.contains(key)) measured[key] = j[key];
  }
  r.measured = measured.get<TrialMetrics>();
  if (!r.measured.finite) ACS_THROW(InvalidArgument, "'{}' is missing", metric::kFinite);
}

TrialMetrics with_measurements(const TrialMetrics& from_steps, const TrialReply& reply) {
  json merged = from_steps;
  const json measured = reply.measured;
  for (const char* key : kWorkerMeasured) {
    if (measured.contains(key)) merged[key] = measured[key];
  }
  return merged.get<TrialMetrics>();
}

std::string encode_trial(const TrialRequest& request) { return message("trial", request); }

std::string encode_stop() { return message("stop", json::object()); }

WorkerMessage decode_worker_message(const std::string& line) {
  const json j = parse_message(line);
  const auto type = j["type"].get<std::string>();
  if (type == "hello") return body_of<WorkerHello>(j);
  if (type == "fatal") return body_of<WorkerFatal>(j);
  if (type == "result") return body_of<TrialReply>(j);
  ACS_THROW(Error, "protocol: unknown message type '{}'", type);
}

std::string encode_hello(const WorkerHello& hello) { return message("hello", hello); }

std::string encode_reply(const TrialReply& reply) { return message("result", reply); }

namespace {

json rank_json(const RankEvidence& r) {
  json j = {{"rank", r.rank}, {"log_path", r.log_path}, {"log_tail", r.log_tail}};
  if (r.exit_code) j["exit_code"] = *r.exit_code;
  if (r.launcher_exit_code) j["launcher_exit_code"] = *r.launcher_exit_code;
  if (r.error) {
    j["error"] = *r.error;
    j["caught_s_ago"] = r.caught_at_s;
  }
  if (r.stack) j["stack"] = *r.stack;
  return j;
}

RankEvidence rank_of(const json& j) {
  json_io::require_object(j, "a rank of the report");
  RankEvidence r;
  r.rank = json_io::required<int>(j, "rank");
  if (r.rank < 0) ACS_THROW(InvalidArgument, "rank {} is negative", r.rank);
  r.exit_code = json_io::optional<int>(j, "exit_code");
  r.launcher_exit_code = json_io::optional<int>(j, "launcher_exit_code");
  r.error = json_io::optional<std::string>(j, "error");
  if (r.error) r.caught_at_s = json_io::required<double>(j, "caught_s_ago");
  json_io::read(j, "log_path", r.log_path);
  json_io::read(j, "log_tail", r.log_tail);
  r.stack = json_io::optional<std::string>(j, "stack");
  return r;
}

NodeHello node_hello_of(const json& j) {
  NodeHello h;
  h.node_rank = json_io::required<int>(j, "node_rank");
  if (h.node_rank < 1) ACS_THROW(InvalidArgument, "node_rank {} is not another node's (accepted: 1 or more)", h.node_rank);
  return h;
}

NodeReport node_report_of(const json& j) {
  NodeReport r;
  r.node_rank = node_hello_of(j).node_rank;
  r.launch = json_io::required<int>(j, "launch");
  r.launcher_exit_code = json_io::required<int>(j, "launcher_exit_code");
  const auto it = j.find("ranks");
  if (it == j.end() || !it->is_array()) json_io::wrong_type("ranks", "an array", it == j.end() ? json() : *it);
  for (const auto& rank : *it) r.ranks.push_back(rank_of(rank));
  return r;
}

EndWorkers end_workers_of(const json& j) {
  EndWorkers end;
  end.trial = json_io::required<int64_t>(j, "trial");
  if (end.trial < 0) ACS_THROW(InvalidArgument, "trial {} is negative", end.trial);
  if (j.contains("relaunch")) {
    end.relaunch = true;
    end.nccl_sockets = parse_nccl_sockets("relaunch.nccl_sockets", json_io::required<std::string>(j.at("relaunch"), "nccl_sockets"));
  }
  return end;
}

// A node message's body; a missing or mistyped field is an Error naming the message.
template <typename T>
T node_body(const json& j, T (*read)(const json&)) {
  try {
    return read(j);
  } catch (const InvalidArgument& e) {
    ACS_THROW(Error, "protocol: '{}' message: {}", j["type"].get<std::string>(), e.what());
  }
}

}  // namespace

std::string encode_node_hello(const NodeHello& hello) { return message("node", {{"node_rank", hello.node_rank}}); }

std::string encode_node_report(const NodeReport& report) {
  json ranks = json::array();
  for (const auto& r : report.ranks) ranks.push_back(rank_json(r));
  return message("workers_ended", {{"node_rank", report.node_rank},
                                   {"launch", report.launch},
                                   {"launcher_exit_code", report.launcher_exit_code},
                                   {"ranks", ranks}});
}

std::string encode_end_workers(const EndWorkers& end) {
  json body = {{"trial", end.trial}};
  if (end.relaunch) body["relaunch"] = {{"nccl_sockets", to_string(end.nccl_sockets)}};
  return message("end_workers", body);
}

EndWorkers decode_node_zero_message(const std::string& line) {
  const json j = parse_message(line);
  const auto type = j["type"].get<std::string>();
  if (type != "end_workers") ACS_THROW(Error, "protocol: unknown message type '{}' from node 0", type);
  return node_body(j, &end_workers_of);
}

NodeMessage decode_node_message(const std::string& line) {
  const json j = parse_message(line);
  const auto type = j["type"].get<std::string>();
  if (type == "node") return node_body(j, &node_hello_of);
  if (type == "workers_ended") return node_body(j, &node_report_of);
  ACS_THROW(Error, "protocol: unknown node message type '{}'", type);
}

std::variant<TrialRequest, std::monostate> decode_tuner_message(const std::string& line) {
  const json j = parse_message(line);
  const auto type = j["type"].get<std::string>();
  if (type == "stop") return std::monostate{};
  if (type != "trial") ACS_THROW(Error, "protocol: unknown message type '{}'", type);
  return body_of<TrialRequest, InvalidArgument>(j);
}

}  // namespace acspeed::tuner
