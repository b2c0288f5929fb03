#include "session_record.h"

#include <chrono>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "acspeed/settings.h"

namespace acspeed::tuner {

SessionRecord new_session_record(const TuneOptions& o, const WorkerHello& hello, const Fingerprint& fp,
                                 const std::string& strategy) {
  using nlohmann::json;
  SessionRecord s;
  s.instance_type = fp.instance_type;
  s.model_name = o.model;
  s.model_signature = hello.model_signature;
  s.precision = to_string(o.precision);
  s.world_size = hello.world_size;
  s.nnodes = hello.nnodes;
  s.batch_size = o.batch_size;
  s.strategy = strategy;
  s.seed = static_cast<int64_t>(o.seed);
  s.search_space_json = json(o.space).dump();
  s.options_json = json{{"args", o.args},
                        {"command_line", o.command_line},
                        {"settings", json(settings_in_environment())},
                        {"batch_size", o.batch_size},
                        {"image_size", o.image_size},
                        {"warmup", o.warmup},
                        {"steps", o.steps},
                        {"repeats", o.repeats},
                        {"budget_minutes", o.budget_minutes},
                        {"trial_timeout_s", o.trial_timeout_s},
                        {"loss_tolerance", o.loss_tolerance},
                        {"trajectory_steps", o.trajectory_steps},
                        {"data", o.data},
                        {"nproc_per_node", o.nproc_per_node},
                        {"notes", o.notes}}
                       .dump();
  s.versions_json = json{{"acspeed", ACSPEED_VERSION_STRING},
                         {"torch", hello.torch_version},
                         {"nccl", hello.nccl_version},
                         {"cuda", hello.cuda_version},
                         {"torch_nccl", hello.torch_nccl_version},
                         {"torch_cuda", hello.torch_cuda_version},
                         {"backend", hello.backend},
                         {"process_group", hello.process_group},
                         {"device", hello.device},
                         {"protocol", kProtocolVersion},
                         {"fingerprint", fp.details}}
                        .dump();
  return s;
}

Decision new_decision(const TuneOptions& o, const WorkerHello& hello, const Fingerprint& fp, int64_t session_id) {
  Decision d;
  d.key = {fp.instance_type, hello.model_signature, std::string(to_string(o.precision)), hello.world_size,
           hello.nnodes, o.gpus_shared};
  d.model_name = o.model;
  d.session_id = session_id;
  d.torch_version = hello.torch_version;
  d.nccl_version = hello.nccl_version;
  d.cuda_version = hello.cuda_version;
  d.batch_size = o.batch_size;
  return d;
}

std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", fmt::gmtime(std::chrono::system_clock::to_time_t(now)), ms);
}

}  // namespace acspeed::tuner
