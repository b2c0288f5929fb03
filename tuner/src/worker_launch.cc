#include "worker_launch.h"

#include <stdlib.h>
#include <sys/un.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "acspeed/error.h"
#include "acspeed/process/exit_status.h"
#include "acspeed/process/run.h"
#include "acspeed/settings.h"
#include "acspeed/tuner/convergence_guard.h"
#include "worker_module.h"

namespace acspeed::tuner {

std::string work_dir_pattern() {
  constexpr const char* kName = "acspeed-tune-XXXXXX";
  constexpr size_t kSocketPathMax = sizeof(sockaddr_un::sun_path) - 1;
  std::error_code ec;
  const std::filesystem::path temp = std::filesystem::temp_directory_path(ec);
  const std::string pattern = (temp / kName).string();
  if (ec || (pattern + "/control.sock").size() > kSocketPathMax) return std::string("/tmp/") + kName;
  return pattern;
}

std::string make_work_dir() {
  std::string pattern = work_dir_pattern();
  if (mkdtemp(pattern.data()) == nullptr) {
    ACS_THROW(Error, "cannot create a work folder {}: {}", pattern, std::strerror(errno));
  }
  return pattern;
}

std::string close_work_dir(const std::string& work_dir, bool keep) {
  if (keep) {
    remove_torchrun_logs(work_dir);
    return work_dir;
  }
  std::error_code ec;
  std::filesystem::remove_all(work_dir, ec);
  return "";
}

namespace {

// NCCL's logging as a job sets it: where one is set, the workers' NCCL logs as the job asked.
constexpr const char* kNcclLogVariables[] = {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"};

}  // namespace

WorkerLaunch make_launch(const TuneOptions& o, const std::string& work_dir) {
  WorkerLaunch l;
  l.python = o.python;
  l.python_path = o.python_path;
  l.worker_args = {"--model",      o.model,
                   "--batch-size", std::to_string(o.batch_size),
                   "--image-size", std::to_string(o.image_size),
                   "--precision",  std::string(to_string(o.precision)),
                   "--seed",       std::to_string(o.seed)};
  if (!o.data.empty()) l.worker_args.insert(l.worker_args.end(), {"--data", o.data});
  if (!o.start_dir.empty()) l.worker_args.insert(l.worker_args.end(), {"--start-dir", o.start_dir});
  // The trajectories' batches are made when the workers start, as many as an extended trajectory
  // may need (convergence_guard.h).
  if (o.compression_searched) {
    l.worker_args.insert(l.worker_args.end(),
                         {"--trajectory-steps", std::to_string(o.trajectory_steps * kTrajectoryCapFactor)});
  }
  l.nnodes = o.nnodes;
  l.node_rank = o.node_rank;
  l.nproc_per_node = o.nproc_per_node;
  l.share_gpus = o.gpus_shared;
  l.pin_nccl_sockets = o.gpus > 0;
  // Which net NCCL chose, from its INFO line (nccl_net.h), unless the job sets NCCL's logging itself.
  const bool own_nccl_log = std::any_of(std::begin(kNcclLogVariables), std::end(kNcclLogVariables),
                                        [](const char* name) { return setting_raw(name).has_value(); });
  if (o.gpus > 0 && !own_nccl_log) l.nccl_debug_file = fmt::format("{}/{}%h.%p.log", work_dir, kNcclNetLog);
  l.master_addr = o.master_addr;
  l.master_port = o.master_port;
  l.work_dir = work_dir;
  l.start_timeout = std::chrono::seconds(std::max(120, o.trial_timeout_s));
  // The ranks' stacks are dumped shortly before the trial times out, so its error says where they hung.
  l.stack_dump_s = std::max(o.trial_timeout_s * 3 / 4, o.trial_timeout_s - 5);
  return l;
}

void supervise_node(const TuneOptions& options, SessionObserver& observer) {
  const std::string work_dir = make_work_dir();
  observer.note(fmt::format("node {}: supervising the local workers; node 0 ({}:{}) coordinates and writes the store",
                            options.node_rank, options.master_addr, options.master_port));
  // The worker logs stay when something failed (node 0's stored reasons name them), as on node 0.
  auto clean_up = [&](bool failed) {
    std::error_code ec;
    if (failed && !std::filesystem::is_empty(work_dir, ec)) {
      remove_torchrun_logs(work_dir);
      observer.note(fmt::format("node {}: worker logs kept in {}", options.node_rank, work_dir));
    } else {
      std::filesystem::remove_all(work_dir, ec);
    }
  };
  int failed_launches = 0;
  try {
    failed_launches = supervise_workers(make_launch(options, work_dir),
                                        std::chrono::seconds(std::max(600, 2 * options.trial_timeout_s)),
                                        [&observer](const std::string& line) { observer.note(line); });
  } catch (...) {
    clean_up(true);
    throw;
  }
  clean_up(failed_launches > 0);
}

std::string check_model(const TuneOptions& options) {
  const WorkerLaunch launch = make_launch(options, "");
  process::RunOptions run;
  run.argv = {launch.python, "-m", std::string(kCheckModule)};
  run.argv.insert(run.argv.end(), launch.worker_args.begin(), launch.worker_args.end());
  run.argv.insert(run.argv.end(), {"--world-size", std::to_string(options.nnodes * options.nproc_per_node)});
  run.env = worker_environment(launch);
  run.timeout = launch.start_timeout;
  const auto result = process::run(run);
  // The check's one line (its message on failure) is its last, after whatever Python warned.
  std::string last_line = result.output;
  while (!last_line.empty() && std::isspace(static_cast<unsigned char>(last_line.back()))) last_line.pop_back();
  last_line.erase(0, last_line.find_last_of('\n') + 1);
  if (result.exit_code == kCheckUsageExit && !result.timed_out) ACS_THROW(InvalidArgument, "{}", last_line);
  if (result.timed_out || result.exit_code != 0) {
    ACS_THROW(Error, "the check of --model {} ({} -m {}) failed with {}: {}", options.model, launch.python,
              kCheckModule,
              result.timed_out ? fmt::format("a timeout of {} s", launch.start_timeout.count())
                               : process::describe_exit_code(result.exit_code),
              last_line.empty() ? "(no output)" : last_line);
  }
  return last_line;
}

std::string describe_workers(const WorkerHello& hello) {
  return fmt::format("workers: world size {} ({} node(s)), {} on {}, model {} ({} parameters, {:.1f} MiB of "
                     "gradients), signature {}, probe: {}",
                     hello.world_size, hello.nnodes, hello.backend, hello.device, hello.model, hello.param_count,
                     static_cast<double>(hello.param_bytes) / (1 << 20), hello.model_signature,
                     hello.probe.empty() ? "none" : hello.probe);
}

}  // namespace acspeed::tuner
