#include "trial_runner.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "acspeed/error.h"
#include "acspeed/log.h"
#include "acspeed/process/exit_status.h"
#include "acspeed/process/signals.h"
#include "acspeed/process/spawn.h"
#include "node_link.h"
#include "rank_failure.h"
#include "worker_module.h"

namespace acspeed::tuner {
namespace {

using Clock = std::chrono::steady_clock;

// torchrun's own log folder of a launch: LOG_PREFIX + this (torchrun_argv).
constexpr std::string_view kTorchrunLogSuffix = ".torchrun";

// How long the evidence of a failed trial may take to settle: torchrun's failure table, the other
// nodes' reports.
constexpr auto kEvidenceWait = std::chrono::seconds(10);
// How long another node's workers may take to end by themselves once node 0 closed the node link.
constexpr auto kNodeZeroGoneGrace = std::chrono::seconds(15);

int free_local_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) ACS_THROW(Error, "socket(): {}", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    ACS_THROW(Error, "cannot find a free local port: {}", std::strerror(errno));
  }
  close(fd);
  return ntohs(addr.sin_port);
}

// Starts one node's workers (torchrun) with the acspeed package in front of PYTHONPATH, stdin
// from /dev/null and their output appended to log_path; they are killed when this process dies.
pid_t start_workers(const WorkerLaunch& l, int master_port, const std::string& control, const std::string& log_path,
                    const std::string& log_prefix) {
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) ACS_THROW(Error, "cannot open worker log {}: {}", log_path, std::strerror(errno));
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  process::SpawnOptions options;
  options.argv = torchrun_argv(l, master_port, control, log_prefix);
  options.env = worker_environment(l);
  options.stdin_fd = null_fd;
  options.stdout_fd = log_fd;
  options.stderr_fd = log_fd;
  options.parent_death_signal = SIGKILL;
  ACS_DEBUG("launching workers: {}", fmt::join(options.argv, " "));
  try {
    const pid_t pid = process::spawn(options);
    close(log_fd);
    if (null_fd >= 0) close(null_fd);
    return pid;
  } catch (...) {
    close(log_fd);
    if (null_fd >= 0) close(null_fd);
    throw;
  }
}

// Kills a launcher (torchrun) and its ranks, and reaps it: its exit code.
int kill_launcher(pid_t pid) {
  // torchrun's ranks run in sessions of their own and die with it (parent-death signal).
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
  return process::wait_exit(pid);
}

}  // namespace

process::Environment worker_environment(const WorkerLaunch& l) {
  process::Environment env = {{"NNODES", std::to_string(l.nnodes)}};
  if (l.share_gpus) env.emplace_back("ACSPEED_SHARE_GPUS", "1");
  if (l.pin_nccl_sockets) {
    env.emplace_back("ACSPEED_NCCL_SOCKETS", to_string(l.nccl_sockets));
    if (l.nccl_sockets) {
      for (auto& variable : nccl_socket_variables(*l.nccl_sockets)) env.push_back(std::move(variable));
    }
  }
  if (!l.nccl_debug_file.empty()) {
    env.emplace_back("NCCL_DEBUG", "INFO");
    env.emplace_back("NCCL_DEBUG_SUBSYS", "INIT,NET");  // "Using network" is an INIT line
    env.emplace_back("NCCL_DEBUG_FILE", l.nccl_debug_file);
  }
  if (!l.python_path.empty()) {
    const char* old = getenv("PYTHONPATH");
    env.emplace_back("PYTHONPATH", old != nullptr && *old != '\0' ? l.python_path + ":" + old : l.python_path);
  }
  return env;
}

void remove_torchrun_logs(const std::string& work_dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(work_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > kTorchrunLogSuffix.size() &&
        name.compare(name.size() - kTorchrunLogSuffix.size(), kTorchrunLogSuffix.size(), kTorchrunLogSuffix) == 0) {
      std::filesystem::remove_all(entry.path(), ec);
    }
  }
}

std::vector<std::string> torchrun_argv(const WorkerLaunch& l, int master_port, const std::string& control,
                                       const std::string& log_prefix) {
  std::vector<std::string> argv = {l.python,
                                   "-m",
                                   "torch.distributed.run",
                                   fmt::format("--nnodes={}", l.nnodes),
                                   fmt::format("--node_rank={}", l.node_rank),
                                   fmt::format("--nproc_per_node={}", l.nproc_per_node),
                                   fmt::format("--master_addr={}", l.master_addr),
                                   fmt::format("--master_port={}", master_port),
                                   "--max_restarts=0",
                                   fmt::format("--log-dir={}{}", log_prefix, kTorchrunLogSuffix),
                                   "-m",
                                   std::string(kWorkerModule)};
  argv.insert(argv.end(), l.worker_args.begin(), l.worker_args.end());
  argv.push_back("--log-prefix");
  argv.push_back(log_prefix);
  if (l.stack_dump_s > 0) {
    argv.push_back("--stack-dump-s");
    argv.push_back(std::to_string(l.stack_dump_s));
  }
  if (!control.empty()) {
    argv.push_back("--control");
    argv.push_back(control);
  }
  return argv;
}

WorkerGroup::WorkerGroup(WorkerLaunch launch) : launch_(std::move(launch)) {
  socket_path_ = launch_.work_dir + "/control.sock";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path_.size() >= sizeof(addr.sun_path)) {
    ACS_THROW(Error, "work folder path too long for a Unix socket: {}", socket_path_);
  }
  std::strncpy(addr.sun_path, socket_path_.c_str(), sizeof(addr.sun_path) - 1);
  unlink(socket_path_.c_str());
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listen_fd_, 4) != 0) {
    ACS_THROW(Error, "cannot listen on {}: {}", socket_path_, std::strerror(errno));
  }
  if (launch_.nnodes > 1) {
    links_ = std::make_unique<NodeLinks>(node_link_port(launch_.master_port), launch_.nnodes);
  }
}

WorkerGroup::~WorkerGroup() {
  try {
    stop();
  } catch (const std::exception& e) {
    ACS_WARN("stopping the workers: {}", e.what());
  }
  if (listen_fd_ >= 0) close(listen_fd_);
  unlink(socket_path_.c_str());
}

bool WorkerGroup::child_alive() {
  if (child_ < 0 || child_reaped_) return false;
  if (const auto code = process::poll_exit(child_)) {
    child_exit_ = *code;
    child_reaped_ = true;
  }
  return !child_reaped_;
}

void WorkerGroup::launch() {
  ++launches_;
  log_prefix_ = fmt::format("{}/workers-{}", launch_.work_dir, launches_);
  log_path_ = log_prefix_ + ".log";
  const int port = launch_.master_port != 0 ? launch_.master_port : free_local_port();
  child_ = start_workers(launch_, port, socket_path_, log_path_, log_prefix_);
  child_reaped_ = false;
  lines_.clear();
  // Wait for rank 0 to connect, watching the launcher.
  const auto deadline = Clock::now() + launch_.start_timeout;
  while (conn_fd_ < 0) {
    process::throw_if_interrupted();
    if (!child_alive()) {
      ACS_THROW(Error, "the workers ended before rank 0 connected ({}): {}", process::describe_exit_code(child_exit_),
                failure_text());
    }
    if (Clock::now() > deadline) {
      kill_workers();
      ACS_THROW(Error, "rank 0 did not connect within {} s: {}", launch_.start_timeout.count(), failure_text());
    }
    if (const auto lost = node_lost()) {
      kill_workers();
      ACS_THROW(Error, "{}", *lost);
    }
    pollfd pfd{listen_fd_, POLLIN, 0};
    if (poll(&pfd, 1, 200) > 0) conn_fd_ = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  }
}

const WorkerHello& WorkerGroup::start() {
  if (conn_fd_ >= 0 && child_alive()) return *hello_;
  kill_workers();
  if (const auto lost = node_lost()) ACS_THROW(Error, "{}", *lost);
  launch();
  bool eof = false;
  const auto line = read_line(Clock::now() + launch_.start_timeout, &eof);
  if (!line) {
    const std::string why = eof ? failure_text() : "no hello from rank 0 in time";
    kill_workers();
    ACS_THROW(Error, "the workers did not start: {}", why);
  }
  const auto message = decode_worker_message(*line);
  if (const auto* fatal = std::get_if<WorkerFatal>(&message)) {
    kill_workers();
    if (fatal->usage) ACS_THROW(InvalidArgument, "{}", fatal->error);
    ACS_THROW(Error, "the workers could not start: {}", fatal->error);
  }
  const auto* hello = std::get_if<WorkerHello>(&message);
  if (hello == nullptr) {
    kill_workers();
    ACS_THROW(Error, "protocol: rank 0 sent something else than hello first: {}", *line);
  }
  if (hello_ && hello->model_signature != hello_->model_signature) {
    kill_workers();
    ACS_THROW(Error, "restarted workers report model signature {} instead of {}", hello->model_signature,
              hello_->model_signature);
  }
  hello_ = *hello;
  return *hello_;
}

std::optional<std::string> WorkerGroup::read_line(Clock::time_point deadline, bool* eof) {
  *eof = false;
  for (;;) {
    if (auto line = lines_.next()) return line;
    process::throw_if_interrupted();
    if (node_lost()) {  // that node's workers are gone with it: no answer is coming
      *eof = true;
      return std::nullopt;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return std::nullopt;
    pollfd pfd{conn_fd_, POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 200)));
    if (ready < 0 && errno != EINTR) ACS_THROW(Error, "poll(): {}", std::strerror(errno));
    if (ready <= 0) continue;
    const bool open = lines_.fill(conn_fd_);
    if (auto line = lines_.next()) return line;  // what it sent before it closed
    if (!open) {
      *eof = true;
      return std::nullopt;
    }
  }
}

TrialOutcome WorkerGroup::run(const TrialRequest& request, std::chrono::seconds timeout) {
  TrialOutcome outcome;
  const auto started = Clock::now();
  auto finish = [&](TrialStatus status, std::string error) {
    // A node that left the session is the cause, whatever its peers saw; what it reported before
    // it went is kept.
    if (status != TrialStatus::kOk) {
      if (const auto lost = node_lost()) {
        outcome.node_lost = true;
        const auto before = explain_rank_failure(links_->reported_ranks());
        error = before ? fmt::format("{}; before that: {}", *lost, *before) : *lost;
      }
    }
    outcome.status = status;
    outcome.error = std::move(error);
    outcome.wall_s = std::chrono::duration<double>(Clock::now() - started).count();
    if (status != TrialStatus::kOk) kill_workers();
    return outcome;
  };
  if (request.config.nccl_sockets != launch_.nccl_sockets) switch_nccl_sockets(request);
  try {
    start();
  } catch (const process::Interrupted&) {
    throw;
  } catch (const Error& e) {
    return finish(TrialStatus::kFailed, e.what());
  }
  if (links_) {
    if (node_lost()) return finish(TrialStatus::kFailed, "");
    links_->forget_reports();
  }
  const std::string line = encode_trial(request) + "\n";
  if (send(conn_fd_, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
    return finish(TrialStatus::kFailed, "lost the connection to rank 0: " + failure_text());
  }
  in_trial_ = true;
  bool eof = false;
  const auto reply_line = read_line(Clock::now() + timeout, &eof);
  in_trial_ = false;
  if (!reply_line) {
    if (eof) {
      if (!node_lost()) await_evidence();  // a node that left is the cause: nothing to wait for
      return finish(TrialStatus::kFailed, failure_text());
    }
    // The workers hang. The other nodes' may hang where node 0 cannot reach them (a rank that never
    // enters a collective does not notice its peers going): their acspeed-tune ends them and
    // reports what they left, their stack dumps among it.
    if (links_) links_->end_workers({request.id});
    kill_workers();
    if (links_ && !node_lost()) links_->await_reports(Clock::now() + kEvidenceWait);
    const auto ranks = evidence();
    std::string where = where_ranks_were(ranks);
    if (launch_.stack_dump_s > 0 && !where.empty()) {
      where = fmt::format("; where the ranks were after {} s: {} (logs: {})", launch_.stack_dump_s, where,
                          rank_logs(ranks));
    }
    return finish(TrialStatus::kTimeout,
                  fmt::format("no result within the trial timeout of {} s{}", timeout.count(), where));
  }
  WorkerMessage message;
  try {
    message = decode_worker_message(*reply_line);
  } catch (const Error& e) {
    return finish(TrialStatus::kFailed, e.what());
  }
  const auto* reply = std::get_if<TrialReply>(&message);
  if (reply == nullptr || reply->id != request.id) {
    return finish(TrialStatus::kFailed, fmt::format("protocol: expected the result of trial {}, got {}", request.id,
                                                    reply_line->substr(0, 200)));
  }
  outcome.reply = *reply;
  if (!reply->ok) {
    // Rank 0's error may be only the news that another rank went: ask the evidence which went first.
    await_evidence();
    const auto why = explain_rank_failure(evidence());
    return finish(TrialStatus::kFailed, why.value_or(reply->error));
  }
  return finish(TrialStatus::kOk, "");
}

void WorkerGroup::switch_nccl_sockets(const TrialRequest& request) {
  ACS_INFO("trial {} runs with NCCL sockets {}: relaunching the workers (they were launched with {})", request.id,
           to_string(request.config.nccl_sockets), to_string(launch_.nccl_sockets));
  launch_.nccl_sockets = request.config.nccl_sockets;
  // The other nodes first: their workers must not see node 0's end as a failure to recover from
  // with the old value.
  if (links_) links_->end_workers({request.id, true, launch_.nccl_sockets});
  kill_workers();
}

void WorkerGroup::kill_workers() {
  in_trial_ = false;
  if (conn_fd_ >= 0) {
    close(conn_fd_);
    conn_fd_ = -1;
  }
  if (child_ > 0 && !child_reaped_) {
    child_exit_ = kill_launcher(child_);
    child_reaped_ = true;
  }
  child_ = -1;
}

void WorkerGroup::stop() {
  if (conn_fd_ >= 0 && !in_trial_ && child_alive()) {
    const std::string line = encode_stop() + "\n";
    send(conn_fd_, line.data(), line.size(), MSG_NOSIGNAL);
    for (int i = 0; i < 300 && child_alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill_workers();
}

void WorkerGroup::await_evidence() {
  // torchrun notices a failed rank, ends the others (SIGTERM) and writes its failure table: the
  // exit codes the explanation needs; the other nodes' workers end too, and their acspeed-tune
  // reports them. A launcher still running after that is killed by the caller.
  const auto deadline = Clock::now() + kEvidenceWait;
  while (Clock::now() < deadline && child_alive()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (links_) links_->await_reports(deadline);
}

std::optional<std::string> WorkerGroup::node_lost() {
  if (!links_) return std::nullopt;
  links_->poll(std::chrono::milliseconds(0));
  return links_->lost();
}

std::vector<RankEvidence> WorkerGroup::evidence() const {
  auto ranks = gather_rank_evidence(log_prefix_, log_path_,
                                    child_reaped_ ? std::optional<int>(child_exit_) : std::nullopt);
  if (!links_) return ranks;
  for (auto& r : ranks) r.node = 0;
  for (auto& r : links_->reported_ranks()) ranks.push_back(std::move(r));
  return ranks;
}

std::string WorkerGroup::failure_text() const {
  // The rank that failed first, on any node (rank_failure.h); else the launcher's explanation:
  // the worker's "failed:" line (it prints its module's name, worker_module.h), else the last error line.
  if (auto why = explain_rank_failure(evidence())) return *why;
  std::ifstream in(log_path_);
  std::string line, worker_line, error_line, last_line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    last_line = line;
    if (line.find(kWorkerModule) != std::string::npos && line.find("failed:") != std::string::npos) {
      worker_line = line;
    } else if (line.find("Error") != std::string::npos || line.find("error") != std::string::npos) {
      error_line = line;
    }
  }
  std::string text = !worker_line.empty() ? worker_line : !error_line.empty() ? error_line : last_line;
  if (text.empty()) text = "the workers ended without output";
  return fmt::format("{} (log: {})", text, log_path_);
}

int supervise_workers(const WorkerLaunch& launch, std::chrono::seconds give_up,
                      const std::function<void(const std::string&)>& note) {
  if (launch.master_port == 0) ACS_THROW(InvalidArgument, "nodes other than 0 need --master-port");
  NodeLink link(launch.master_addr, node_link_port(launch.master_port), launch.node_rank, give_up);
  WorkerLaunch current = launch;  // its NCCL sockets follow node 0's relaunch requests
  auto last_success = Clock::now();
  int failed = 0;
  for (int attempt = 1;; ++attempt) {
    const std::string log_prefix = fmt::format("{}/workers-{}", launch.work_dir, attempt);
    const std::string log_path = log_prefix + ".log";
    const auto started = Clock::now();
    const pid_t pid = start_workers(current, launch.master_port, "", log_path, log_prefix);
    std::optional<int> code;
    std::optional<Clock::time_point> node0_gone;  // when node 0 closed the link
    std::optional<EndWorkers> ended_for;          // node 0's request that ended them
    try {
      while (!(code = process::poll_exit(pid))) {
        process::throw_if_interrupted();
        if (!node0_gone && link.closed(std::chrono::milliseconds(200))) node0_gone = Clock::now();
        if (!node0_gone) {
          ended_for = link.take_end_request();
          if (!ended_for) continue;
          code = kill_launcher(pid);
          break;
        }
        if (Clock::now() - *node0_gone > kNodeZeroGoneGrace) {
          code = kill_launcher(pid);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    } catch (const process::Interrupted&) {
      kill_launcher(pid);
      throw;
    }
    if (*code == 0) {
      note(fmt::format("node {}: workers ended cleanly (node 0 finished)", launch.node_rank));
      return failed;
    }
    ++failed;
    // A request that came as they ended by themselves was about them, not about the next launch; a
    // relaunch with other NCCL sockets is about the next launch.
    if (const auto late = link.take_end_request(); late && late->relaunch) ended_for = late;
    const bool relaunch = ended_for && ended_for->relaunch;
    if (!relaunch) link.report(attempt, *code, gather_rank_evidence(log_prefix, log_path, *code));
    if (node0_gone || link.closed(std::chrono::milliseconds(0))) {
      ACS_THROW(Error, "node {}: node 0's acspeed-tune closed the node link ({}): its session is over, so the "
                "workers, which ended with {}, are not relaunched (log: {})", launch.node_rank, link.endpoint(),
                process::describe_exit_code(*code), log_path);
    }
    // A run that lasted long enough had joined node 0's workers; a quick failure had not.
    if (Clock::now() - started > std::chrono::seconds(30)) last_success = Clock::now();
    if (relaunch) {
      current.nccl_sockets = ended_for->nccl_sockets;
      note(fmt::format("node {}: node 0's trial {} runs with NCCL sockets {}: relaunching this node's workers with them",
                       launch.node_rank, ended_for->trial, to_string(current.nccl_sockets)));
      last_success = Clock::now();
    } else if (ended_for) {
      note(fmt::format("node {}: node 0's trial {} timed out: ended this node's workers too (logs: {}-rank*.log); "
                       "relaunching to rejoin node 0", launch.node_rank, ended_for->trial, log_prefix));
    } else {
      note(fmt::format("node {}: workers ended ({}); relaunching to rejoin node 0", launch.node_rank,
                       process::describe_exit_code(*code)));
    }
    if (Clock::now() - last_success > give_up) {
      ACS_THROW(Error, "node {}: no rendezvous with node 0 for {} s: giving up (last log: {})", launch.node_rank,
                give_up.count(), log_path);
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

}  // namespace acspeed::tuner
