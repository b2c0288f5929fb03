#include "acspeed/testbed/cluster.h"

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <algorithm>
#include <fstream>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "acspeed/testbed/net_plan.h"
#include "acspeed/process/run.h"
#include "acspeed/process/signals.h"
#include "acspeed/process/spawn.h"
#include "acspeed/process/supervise.h"

namespace acspeed::testbed {
namespace {

using process::notice;

bool has_capability(int cap) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("CapEff:", 0) == 0) {
      const uint64_t mask = std::stoull(line.substr(7), nullptr, 16);
      return (mask >> cap) & 1U;
    }
  }
  return false;
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

void kill_netns_processes(const std::string& netns, double grace_s, std::vector<std::string>& problems) {
  auto pids = pids_in_netns(netns);
  if (pids.empty()) return;
  notice(fmt::format("acspeed-testbed: stopping {} process(es) left in {}", pids.size(), netns));
  for (pid_t pid : pids) kill(pid, SIGTERM);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  while (!pids.empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    while (waitpid(-1, nullptr, WNOHANG) > 0) {  // our own children would stay zombies
    }
    pids = pids_in_netns(netns);
  }
  for (pid_t pid : pids) kill(pid, SIGKILL);
  for (int i = 0; i < 40 && !pids.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    pids = pids_in_netns(netns);
  }
  if (!pids.empty()) problems.push_back(fmt::format("{} process(es) in {} did not die", pids.size(), netns));
}

}  // namespace

void preflight() {
  const bool caps = has_capability(12 /* CAP_NET_ADMIN */) && has_capability(21 /* CAP_SYS_ADMIN */);
  if (!caps) {
    throw NotPermitted(fmt::format(
        "acspeed-testbed needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) to create network "
        "namespaces; this process (uid {}) lacks them: run it as root (sudo)", geteuid()));
  }
  for (const char* tool : {"ip", "tc"}) {
    if (!process::find_program(tool)) {
      throw NotPermitted(fmt::format("'{}' was not found (PATH, /usr/sbin, /sbin): install iproute2", tool));
    }
  }
  // In a short-lived child, so this process stays in its own namespace.
  const int code = process::run_in_child([] { return unshare(CLONE_NEWNET) == 0 ? 0 : (errno & 0x7f) + 1; });
  if (code != 0) {
    const int err = code < 128 ? code - 1 : 0;
    throw NotPermitted(fmt::format(
        "this machine does not allow creating network namespaces (unshare(CLONE_NEWNET): {}); "
        "in a container, run it privileged", err ? std::strerror(err) : "killed"));
  }
}

ClusterLayout layout_of(const ClusterState& state) {
  const Profile profile = parse_profile(state.profile);
  ClusterLayout layout = make_layout(state.name, profile.nodes);
  ACS_ENFORCE(layout.all_netns() == state.netns, "state of cluster '{}' does not match its layout",
              state.name);
  return layout;
}

ClusterState bring_up(const UpOptions& options) {
  if (options.master_port < 1 || options.master_port > 65535) {
    ACS_THROW(InvalidArgument, "master port {} is outside 1..65535", options.master_port);
  }
  ClusterState state;
  state.profile = options.profile.text();
  state.master_port = options.master_port;
  state.created_unix = static_cast<int64_t>(std::time(nullptr));
  if (options.owned) {
    state.owner_pid = getpid();
    state.owner_start_ticks = process_start_ticks(state.owner_pid).value_or(0);
  }
  ClusterLayout layout;
  for (int attempt = 0;; ++attempt) {
    const std::string name = options.name.empty() ? random_cluster_name() : options.name;
    layout = make_layout(name, options.profile.nodes);
    state.name = name;
    state.netns = layout.all_netns();
    bool netns_taken = false;
    for (const auto& ns : state.netns) netns_taken = netns_taken || path_exists(netns_path(ns));
    if (!netns_taken && create_state(options.state_dir, state)) break;
    if (!options.name.empty()) {
      ACS_THROW(InvalidArgument, "cluster '{}' already exists (see `acspeed-testbed status`; "
                "remove it with `acspeed-testbed down {}`)", name, name);
    }
    ACS_ENFORCE(attempt < 16, "no free random cluster name after {} attempts", attempt + 1);
  }
  try {
    for (const auto& command : bring_up_commands(layout, options.profile)) {
      process::throw_if_interrupted();
      process::RunOptions run{command.argv, command.input};
      run.check = true;
      process::run(run);
    }
    process::throw_if_interrupted();
  } catch (...) {
    for (const auto& problem : tear_down(state, options.state_dir)) notice("acspeed-testbed: " + problem);
    throw;
  }
  return state;
}

std::vector<std::string> tear_down(const ClusterState& state, const std::string& state_dir, double grace_s) {
  // Every step is attempted whatever the previous one did (a log line to a closed stderr included).
  std::vector<std::string> problems;
  for (const auto& ns : state.netns) {
    try {
      if (!path_exists(netns_path(ns))) continue;
      kill_netns_processes(ns, grace_s, problems);
      const auto result = process::run({{"ip", "netns", "del", ns}});
      if (result.exit_code != 0 && path_exists(netns_path(ns))) {
        problems.push_back(fmt::format("could not delete namespace {}: {}", ns, result.output));
      }
    } catch (const std::exception& e) {
      problems.push_back(fmt::format("removing namespace {}: {}", ns, e.what()));
    }
  }
  bool removed = false;
  for (const auto& ns : state.netns) removed = removed || path_exists(netns_path(ns));
  if (!removed) {
    try {
      remove_state(state_dir, state.name);
    } catch (const std::exception& e) {
      problems.push_back(e.what());
    }
  } else {
    problems.push_back(fmt::format("kept {} so `acspeed-testbed down {}` can retry",
                                   state_path(state_dir, state.name), state.name));
  }
  return problems;
}

std::vector<pid_t> pids_in_netns(const std::string& netns) {
  std::vector<pid_t> out;
  struct stat target {};
  if (stat(netns_path(netns).c_str(), &target) != 0) return out;
  DIR* proc = opendir("/proc");
  if (!proc) return out;
  const pid_t self = getpid();
  while (const dirent* entry = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == self) continue;
    struct stat st {};
    const std::string path = fmt::format("/proc/{}/ns/net", pid);
    if (stat(path.c_str(), &st) == 0 && st.st_ino == target.st_ino && st.st_dev == target.st_dev) {
      out.push_back(static_cast<pid_t>(pid));
    }
  }
  closedir(proc);
  return out;
}

std::vector<std::string> testbed_netns() {
  std::vector<std::string> out;
  DIR* d = opendir(std::string(kNetnsDir).c_str());
  if (!d) return out;
  while (const dirent* entry = readdir(d)) {
    if (!cluster_of_netns(entry->d_name).empty()) out.emplace_back(entry->d_name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

StaleReport find_stale(const std::string& state_dir) {
  StaleReport report;
  // Namespaces first: a run writes its state file before its first namespace, so every namespace
  // listed here whose cluster is live is covered by a file read below.
  const auto namespaces = testbed_netns();
  std::set<std::string> covered;
  for (auto& state : read_all_states(state_dir)) {
    covered.insert(state.netns.begin(), state.netns.end());
    if (is_stale(state)) report.stale.push_back(std::move(state));
  }
  for (const auto& ns : namespaces) {
    if (!covered.count(ns)) report.orphan_netns.push_back(ns);
  }
  return report;
}

}  // namespace acspeed::testbed
