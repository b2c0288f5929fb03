#include "protocol.h"

#include <nlohmann/json.hpp>

#include "acspeed/error.h"

namespace acspeed::tuner {
namespace {

using nlohmann::json;

json parse_message(const std::string& line) {
  const json j = json::parse(line, nullptr, false);
  if (!j.is_object()) ACS_THROW(Error, "protocol: not a JSON object: '{}'", line.substr(0, 200));
  if (!j.contains("v") || !j["v"].is_number_integer()) {
    ACS_THROW(Error, "protocol: message without a version: '{}'", line.substr(0, 200));
  }
  if (j["v"].get<int>() != kProtocolVersion) {
    ACS_THROW(Error, "protocol: message version {} but this tuner speaks version {} (worker and tuner from different "
              "builds?)", j["v"].get<int>(), kProtocolVersion);
  }
  if (!j.contains("type") || !j["type"].is_string()) ACS_THROW(Error, "protocol: message without a type: '{}'", line);
  return j;
}

template <typename T>
T field(const json& j, const char* key) {
  if (!j.contains(key)) ACS_THROW(Error, "protocol: '{}' message lacks '{}'", j.value("type", ""), key);
  try {
    return j[key].get<T>();
  } catch (const json::exception&) {
    ACS_THROW(Error, "protocol: '{}' message has a bad '{}': {}", j.value("type", ""), key, j[key].dump());
  }
}

template <typename T>
std::optional<T> optional_field(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return field<T>(j, key);
}

}  // namespace

std::string encode_trial(const TrialRequest& r) {
  return json{{"v", kProtocolVersion},
              {"type", "trial"},
              {"id", r.id},
              {"config", json::parse(config_to_json(r.config))},
              {"warmup", r.warmup},
              {"steps", r.steps}}
      .dump();
}

std::string encode_stop() { return json{{"v", kProtocolVersion}, {"type", "stop"}}.dump(); }

WorkerMessage decode_worker_message(const std::string& line) {
  const json j = parse_message(line);
  const auto type = j["type"].get<std::string>();
  if (type == "hello") {
    WorkerHello h;
    h.world_size = field<int>(j, "world_size");
    h.nnodes = field<int>(j, "nnodes");
    h.local_world_size = field<int>(j, "local_world_size");
    h.backend = field<std::string>(j, "backend");
    h.device = field<std::string>(j, "device");
    h.model = field<std::string>(j, "model");
    h.model_signature = field<std::string>(j, "model_signature");
    h.param_count = field<int64_t>(j, "param_count");
    h.param_bytes = field<int64_t>(j, "param_bytes");
    h.torch_version = field<std::string>(j, "torch_version");
    h.nccl_version = optional_field<std::string>(j, "nccl_version").value_or("");
    h.cuda_version = optional_field<std::string>(j, "cuda_version").value_or("");
    h.batch_size = field<int>(j, "batch_size");
    h.precision = field<std::string>(j, "precision");
    h.probe = optional_field<std::string>(j, "probe").value_or("");
    return h;
  }
  if (type == "fatal") return WorkerFatal{field<std::string>(j, "error"), optional_field<bool>(j, "usage").value_or(false)};
  if (type == "result") {
    TrialReply r;
    r.id = field<int64_t>(j, "id");
    const auto status = field<std::string>(j, "status");
    if (status != "ok" && status != "failed") ACS_THROW(Error, "protocol: result status '{}' is not ok or failed", status);
    r.ok = status == "ok";
    if (!r.ok) {
      r.error = field<std::string>(j, "error");
      return r;
    }
    r.step_times_s = field<std::vector<double>>(j, "step_times_s");
    if (r.step_times_s.empty()) ACS_THROW(Error, "protocol: result {} has no step times", r.id);
    auto& m = r.measured;
    m.loss_first = optional_field<double>(j, "loss_first");
    m.loss = optional_field<double>(j, "loss");
    m.finite = optional_field<bool>(j, "finite").value_or(true);
    m.rebuild_s = optional_field<double>(j, "rebuild_s");
    m.compute_s = optional_field<double>(j, "compute_s");
    m.comm_s = optional_field<double>(j, "comm_s");
    m.exposed_comm_s = optional_field<double>(j, "exposed_comm_s");
    m.probe = optional_field<std::string>(j, "probe").value_or("");
    return r;
  }
  ACS_THROW(Error, "protocol: unknown message type '{}'", type);
}

std::string encode_hello(const WorkerHello& h) {
  return json{{"v", kProtocolVersion},     {"type", "hello"},
              {"world_size", h.world_size}, {"nnodes", h.nnodes},
              {"local_world_size", h.local_world_size},
              {"backend", h.backend},       {"device", h.device},
              {"model", h.model},           {"model_signature", h.model_signature},
              {"param_count", h.param_count}, {"param_bytes", h.param_bytes},
              {"torch_version", h.torch_version}, {"nccl_version", h.nccl_version},
              {"cuda_version", h.cuda_version}, {"batch_size", h.batch_size},
              {"precision", h.precision},   {"probe", h.probe}}
      .dump();
}

std::string encode_reply(const TrialReply& r) {
  json j = {{"v", kProtocolVersion}, {"type", "result"}, {"id", r.id}, {"status", r.ok ? "ok" : "failed"}};
  if (!r.ok) {
    j["error"] = r.error;
    return j.dump();
  }
  j["step_times_s"] = r.step_times_s;
  j["finite"] = r.measured.finite;
  auto put = [&j](const char* key, const std::optional<double>& v) {
    if (v) j[key] = *v;
  };
  put("loss_first", r.measured.loss_first);
  put("loss", r.measured.loss);
  put("rebuild_s", r.measured.rebuild_s);
  put("compute_s", r.measured.compute_s);
  put("comm_s", r.measured.comm_s);
  put("exposed_comm_s", r.measured.exposed_comm_s);
  if (!r.measured.probe.empty()) j["probe"] = r.measured.probe;
  return j.dump();
}

std::variant<TrialRequest, std::monostate> decode_tuner_message(const std::string& line) {
  const json j = parse_message(line);
  const auto type = j["type"].get<std::string>();
  if (type == "stop") return std::monostate{};
  if (type != "trial") ACS_THROW(Error, "protocol: unknown message type '{}'", type);
  TrialRequest r;
  r.id = field<int64_t>(j, "id");
  r.config = config_from_json(field<json>(j, "config").dump());
  r.warmup = field<int>(j, "warmup");
  r.steps = field<int>(j, "steps");
  return r;
}

}  // namespace acspeed::tuner
