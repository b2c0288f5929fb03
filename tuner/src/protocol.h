// The tuner <-> rank 0 protocol: one JSON object per line over a local (Unix) socket that the tuner
// listens on and rank 0 connects to (`python -m acspeed._worker.worker --control PATH`). Every message
// carries "v": kProtocolVersion and a "type"; a message of another version is refused.
//
//   worker -> tuner  {"v":1,"type":"hello","world_size":4,"nnodes":2,"local_world_size":2,
//                     "backend":"gloo","device":"cpu","model":"resnet18","model_signature":"p62-...",
//                     "param_count":11689512,"param_bytes":46758048,"torch_version":"2.15.0",
//                     "nccl_version":"","cuda_version":"","batch_size":8,"precision":"fp32",
//                     "probe":"acspeed.probes","gradients":{"matrices":[[64,27,4,1],...],"vectors":[[64,4,2],...]}}
//                    {"v":1,"type":"fatal","error":"...","usage":false}  (setup failed; the worker exits;
//                                                     usage: the --model given names nothing buildable)
//   tuner -> worker  {"v":1,"type":"trial","id":7,"config":{CommConfig JSON},"warmup":2,"steps":5,
//                     "mode":"compute","fidelity_steps":32,"trajectory_steps":60}   (mode: absent = "ddp";
//                     see TrialMode; fidelity_steps: absent = 0, the gradient-fidelity window of a compressed
//                     config; trajectory_steps: absent = 0, the loss trajectory; convergence_guard.h)
//   worker -> tuner  {"v":1,"type":"result","id":7,"status":"ok","step_times_s":[...],
//                     "loss_first":6.9,"loss":6.8,"losses":[6.9,...,6.8],"warmup_steps":2,"finite":true,
//                     "rebuild_s":0.4,"compute_s":..,"comm_s":..,"exposed_comm_s":..,"probe":"cpu",
//                     "bucket_count":3,"bucket_bytes":46758048,   (compute mode: "forward_s", "optimizer_s")
//                     compressed configs: "fidelity_cosine","fidelity_norm_error","fidelity_step_cosine_min",
//                     "fidelity_steps"; powersgd: "compression_s"; where /proc/stat reads: "cpu_floor_s";
//                     trajectory_steps > 0: "trajectory":[...] or "trajectory_finite":false}
//                    {"v":1,"type":"result","id":7,"status":"failed","error":"RuntimeError: ..."}
//   tuner -> worker  {"v":1,"type":"stop"}
// Rank 0 broadcasts each tuner message to the other ranks; step times are the max over ranks per
// step, losses the mean over ranks.
//
// The node link (node_link.h): with several nodes, the acspeed-tune of each other node connects to
// node 0's tuner over TCP and sends, in the same envelope:
//   node -> tuner    {"v":1,"type":"node","node_rank":1}   (first, once)
//                    {"v":1,"type":"workers_ended","node_rank":1,"launch":2,"launcher_exit_code":1,
//                     "ranks":[{"rank":1,"exit_code":3,"caught_s_ago":0.4,"error":"RuntimeError: ...",
//                               "log_path":"/tmp/acspeed-tune-x/workers-2-rank1.log","log_tail":["..."]}]}
//                    (its workers ended abnormally: what they left, rank_failure.h; "exit_code",
//                    "launcher_exit_code" of a rank, "error" and "caught_s_ago" only where known;
//                    "caught_s_ago": seconds before the report was sent, as the nodes' clocks differ;
//                    "stack": where the rank was in its log's last stack dump, when it has one)
// and node 0 sends the other nodes:
//   tuner -> node    {"v":1,"type":"end_workers","trial":7}   (trial 7 ran past its timeout: the
//                    node ends its workers, which may hang where node 0 cannot reach them, and
//                    reports what they left, as when they end by themselves)
//                    {"v":1,"type":"end_workers","trial":8,"relaunch":{"nccl_sockets":"2x4"}}
//                    (trial 8 runs with another value of an instance knob, knobs.h's
//                    before_communicator: the node ends its workers and relaunches them with it,
//                    "0" = NCCL's choice; nothing is reported)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "acspeed/config.h"
#include "acspeed/tuner/gradient_layout.h"
#include "acspeed/tuner/trial_metrics.h"
#include "rank_failure.h"

namespace acspeed::tuner {

inline constexpr int kProtocolVersion = 1;

struct WorkerHello {
  int world_size = 0;
  int nnodes = 1;
  int local_world_size = 0;
  std::string backend;  // gloo|nccl
  std::string device;   // cpu|cuda
  std::string model;
  std::string model_signature;
  int64_t param_count = 0;
  int64_t param_bytes = 0;
  std::string torch_version;
  // torch's own NCCL and CUDA (acspeed.versions), "" when the workers do not run on CUDA: what a
  // decision records, because it is what `import acspeed` compares with (not the system NCCL).
  std::string nccl_version;
  std::string cuda_version;
  // What the workers' torch bundles, used or not (job_versions.h; "" from a worker that does not say).
  std::string torch_nccl_version;
  std::string torch_cuda_version;
  // The implementation running the workers' default process group ("gloo", "nccl2", "nccl";
  // acspeed.versions): torch 2.15's backend="nccl" is nccl2, 2.11's the classic group. "" = not said.
  std::string process_group;
  int batch_size = 0;
  std::string precision;
  std::string probe;  // empty when no probe is available
  // The shapes of the gradients (gradient_layout.h; empty when the worker did not say): the bytes a
  // compressed config sends, for the step model and the note when compression was not searched.
  GradientLayout gradients;
};

struct WorkerFatal {
  std::string error;
  bool usage = false;  // the user's --model is at fault (a usage error), not the machine
};

// How the workers run a trial's steps.
enum class TrialMode {
  kDdp,          // the model in DDP with the config, as `import acspeed` applies it
  kComputeOnly,  // the bare model, no DDP, no communication: forward, backward, optimizer timed apart
  kHooked,       // like kDdp, but through acspeed's comm hook even where the config needs none (DDP's
                 // defaults: the same buckets and bytes as DDP's allreduce, with per-bucket times)
};
std::string_view to_string(TrialMode mode);

struct TrialRequest {
  int64_t id = 0;
  CommConfig config;
  int warmup = 0;
  int steps = 0;
  TrialMode mode = TrialMode::kDdp;
  int fidelity_steps = 0;  // > 0: measure the gradient-fidelity window (compressed configs only)
  int trajectory_steps = 0;  // > 0: run the loss trajectory of that many steps (convergence_guard.h)
};

struct TrialReply {
  int64_t id = 0;
  bool ok = false;
  std::string error;                 // when !ok
  std::vector<double> step_times_s;  // max over ranks per step
  // What the workers measure besides the step times, under the metric names of trial_metrics.h:
  // loss_first, loss, losses, finite (required), warmup_steps, rebuild_s, compute_s, comm_s, exposed_comm_s,
  // probe, bucket_count, bucket_bytes, forward_s, optimizer_s, compression_s, cpu_floor_s, fidelity_*, trajectory,
  // trajectory_finite, trajectory_s.
  TrialMetrics measured;
};

// The session's metrics of an ok trial: `from_steps` (metrics_from_steps) with the workers'
// measurements of the reply.
TrialMetrics with_measurements(const TrialMetrics& from_steps, const TrialReply& reply);

// The messages' bodies for nlohmann::json (ADL); encode/decode add and check "v" and "type".
void to_json(nlohmann::json& j, const WorkerHello& hello);
void from_json(const nlohmann::json& j, WorkerHello& hello);
void from_json(const nlohmann::json& j, WorkerFatal& fatal);
void to_json(nlohmann::json& j, const TrialRequest& request);
void from_json(const nlohmann::json& j, TrialRequest& request);
void to_json(nlohmann::json& j, const TrialReply& reply);
void from_json(const nlohmann::json& j, TrialReply& reply);

using WorkerMessage = std::variant<WorkerHello, WorkerFatal, TrialReply>;

std::string encode_trial(const TrialRequest& request);
std::string encode_stop();
// Decodes one line from rank 0; throws Error naming what is wrong (not JSON, other version,
// unknown type, missing field).
WorkerMessage decode_worker_message(const std::string& line);

// The worker side of the protocol, used by tests that play rank 0.
std::string encode_hello(const WorkerHello& hello);
std::string encode_reply(const TrialReply& reply);
// The tuner side decoded: "trial" or "stop".
std::variant<TrialRequest, std::monostate> decode_tuner_message(const std::string& line);

// The node link's messages: another node's acspeed-tune says which node it is, then reports each
// time its workers end abnormally.
struct NodeHello {
  int node_rank = 1;
};
struct NodeReport {
  int node_rank = 1;
  int launch = 0;              // that node's launch number (its logs: workers-LAUNCH-rankR.log)
  int launcher_exit_code = 0;  // how its torchrun ended (process/include/acspeed/process/exit_status.h)
  // Its ranks' evidence; caught_at_s holds how long before the report the error was caught.
  std::vector<RankEvidence> ranks;
};
using NodeMessage = std::variant<NodeHello, NodeReport>;
std::string encode_node_hello(const NodeHello& hello);
std::string encode_node_report(const NodeReport& report);
// Throws Error naming what is wrong, as decode_worker_message.
NodeMessage decode_node_message(const std::string& line);

// Node 0's request to the other nodes: end the workers (a trial timed out) and report what they left;
// or, with `relaunch`, end them and launch them again with `nccl_sockets` (the next trial's).
struct EndWorkers {
  int64_t trial = 0;  // the trial that timed out, or the one the relaunch is for
  bool relaunch = false;
  std::optional<NcclSockets> nccl_sockets;  // with relaunch: the new launch's (nullopt: NCCL's choice)
};
std::string encode_end_workers(const EndWorkers& end);
// Throws Error naming what is wrong, as decode_worker_message.
EndWorkers decode_node_zero_message(const std::string& line);

}  // namespace acspeed::tuner
