#include "commands.h"

#include <sched.h>
#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <system_error>

#include <fmt/format.h>

#include "acspeed/error.h"
#include "acspeed/process/spawn.h"
#include "acspeed/process/supervise.h"
#include "acspeed/testbed/cluster.h"
#include "acspeed/testbed/node_launch.h"

namespace acspeed::testbed {
namespace {

using process::notice;

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
  }
  return cpus;
}

// A folder for torchrun's logs (--log-dir), removed when the command ends: without one, every
// launch leaves a /tmp/torchelastic_* folder behind. The workers' output reaches the terminal
// either way; the folder holds only torchrun's per-attempt bookkeeping.
class TorchrunLogs {
 public:
  TorchrunLogs() {
    std::string pattern = (std::filesystem::temp_directory_path() / "acspeed-testbed-torchrun-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      ACS_THROW(Error, "cannot create a folder for torchrun's logs ({}): {}", pattern, std::strerror(errno));
    }
    path_ = pattern;
  }
  TorchrunLogs(const TorchrunLogs&) = delete;
  TorchrunLogs& operator=(const TorchrunLogs&) = delete;
  ~TorchrunLogs() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string node(int rank) const { return (std::filesystem::path(path_) / fmt::format("node{}", rank)).string(); }

 private:
  std::string path_;
};

}  // namespace

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"run", cmd_run}, {"up", cmd_up}, {"exec", cmd_exec}, {"down", cmd_down}, {"status", cmd_status}};
  return table;
}

po::variables_map parse_command(const std::string& name, const std::vector<std::string>& words,
                                po::options_description& options,
                                const po::positional_options_description& positional) {
  options.add_options()("help,h", "this help");
  po::variables_map vm;
  po::store(po::command_line_parser(words).options(options).positional(positional).run(), vm);
  if (vm.count("help")) {
    std::cout << "acspeed-testbed " << name << "\n" << options << "\n";
    std::exit(0);
  }
  po::notify(vm);
  return vm;
}

void add_launch_options(po::options_description& options, LaunchOptions& launch_options) {
  options.add_options()
      ("pin", po::bool_switch(&launch_options.pin),
       "pin each node's processes to its own block of CPUs (taskset), so nodes do not fight")
      ("timeout", po::value(&launch_options.timeout_s)->default_value(0),
       "stop the command after this many seconds (exit 124); 0 = no limit");
}

int launch(const ClusterState& state, const std::vector<int>& ranks, const std::vector<std::string>& command,
           const LaunchOptions& options) {
  const ClusterLayout layout = layout_of(state);
  const Profile profile = parse_profile(state.profile);
  const auto cpus = allowed_cpus();
  if (options.pin && static_cast<int>(cpus.size()) < profile.nodes) {
    notice(fmt::format("acspeed-testbed: --pin with {} CPU(s) for {} nodes: nodes share CPUs", cpus.size(),
                       profile.nodes));
  }
  std::optional<TorchrunLogs> torchrun_logs;
  if (options.torchrun) torchrun_logs.emplace();
  std::vector<pid_t> children;
  for (int rank : ranks) {
    process::SpawnOptions spawn_options;
    spawn_options.argv =
        options.torchrun
            ? torchrun_command(layout, profile, rank, state.master_port,
                               {options.python, command, torchrun_logs->node(rank)})
            : command;
    spawn_options.env = node_environment(layout, profile, rank, state.master_port);
    spawn_options.netns_path = netns_path(layout.nodes[static_cast<size_t>(rank)].netns);
    if (options.pin) spawn_options.cpus = cpus_for_node(cpus, profile.nodes, rank);
    children.push_back(process::spawn(spawn_options));
  }
  process::SuperviseOptions supervise_options;
  supervise_options.who = "acspeed-testbed";
  supervise_options.timeout_s = options.timeout_s;
  const process::SuperviseResult result = process::supervise(children, supervise_options);
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (result.exit_codes[i] != 0) {
      notice(fmt::format("acspeed-testbed: node {} exited with {}", ranks[i], result.exit_codes[i]));
    }
  }
  if (result.timed_out) notice(fmt::format("acspeed-testbed: stopped after --timeout {} s", options.timeout_s));
  return result.exit_code();
}

void print_cluster(const ClusterState& state) {
  const ClusterLayout layout = layout_of(state);
  notice(fmt::format("acspeed-testbed: cluster {} ({}), master {}:{}", state.name, state.profile,
                     layout.nodes.front().address, state.master_port));
  for (const auto& node : layout.nodes) {
    notice(fmt::format("  node {}: {} {} in netns {}", node.rank, node.ifname, node.address, node.netns));
  }
}

int report_problems(const std::vector<std::string>& problems) {
  for (const auto& problem : problems) notice(fmt::format("acspeed-testbed: {}", problem));
  return problems.empty() ? 0 : 1;
}

}  // namespace acspeed::testbed
