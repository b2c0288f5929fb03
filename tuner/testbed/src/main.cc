// acspeed-testbed: an emulated multi-node cluster on one machine (network namespaces joined by a
// bridge, each node's link capped with HTB) for tuning, testing and benchmarking communication.
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <ctime>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "acspeed/log.h"
#include "acspeed/settings.h"
#include "acspeed/testbed/cluster.h"
#include "acspeed/testbed/node_launch.h"
#include "acspeed/process/signals.h"
#include "acspeed/process/spawn.h"
#include "acspeed/process/supervise.h"

namespace po = boost::program_options;
using namespace acspeed;
using namespace acspeed::testbed;
using acspeed::process::notice;

namespace {

constexpr int kExitUsage = 2;

constexpr const char* kOverview = R"(acspeed-testbed: an emulated cluster on this machine, for tuning and benchmarking
communication where the inter-node link is the bottleneck, as on real clusters.

Usage:
  acspeed-testbed [--state-dir DIR] [--log-level LEVEL] COMMAND [options] [-- CMD ...]

Commands:
  run PROFILE [options] -- CMD ...   bring a cluster up, run CMD once in every node, tear it down
                                     when CMD ends or on Ctrl-C/SIGTERM; exits with CMD's status
  up PROFILE [--name NAME]           bring a cluster up and leave it (prints its name)
  exec NAME NODE [options] -- CMD    run CMD in node NODE of a cluster made by `up`
  down [NAME ...] [--all]            remove clusters (live ones too); without names: only what
                                     crashed runs left (owner process gone)
  status [NAME ...]                  list clusters, their nodes and addresses

Profiles: NODESxPROCS[@RATE[/FLOWRATE]]
  NODES     nodes (network namespaces), 1..64
  PROCS     processes per node (what --torchrun passes as --nproc_per_node), 1..256
  RATE      each node's link, in each direction (kbit, mbit, gbit; e.g. 500mbit, 1.5gbit);
            omitted = uncapped
  FLOWRATE  cap of every TCP connection leaving a node (cloud per-flow limits), <= RATE
  e.g. 2x1@1gbit, 2x2@2gbit, 4x1@500mbit, 2x1@10gbit/2gbit

Every node sees: NODE_RANK, NNODES, NPROC_PER_NODE, NODE_ADDR, MASTER_ADDR (node 0),
MASTER_PORT, GLOO_SOCKET_IFNAME=eth0, NCCL_SOCKET_IFNAME=eth0, ACSPEED_TESTBED (the cluster)
and ACSPEED_INSTANCE_TYPE=testbed-PROFILE, so tuned decisions are stored per link profile.

Multi-node DDP:
  acspeed-testbed run 2x1@1gbit --pin --torchrun -- examples/Pytorch_ddp_benchmark.py --model resnet18
starts in every node:
  PYTHON -m torch.distributed.run --nnodes=N --nproc_per_node=PROCS --rdzv_backend=c10d
         --rdzv_endpoint=MASTER_ADDR:MASTER_PORT --rdzv_id=CLUSTER --rdzv_conf=is_host=1|0
         --local_addr=NODE_ADDR SCRIPT ARGS...

Exit status: CMD's (first failing node), 124 on --timeout, 128+N on signal N, 2 on bad usage,
77 when this machine does not allow network namespaces (not root), 1 on other errors.
)";

struct Args {
  std::vector<std::string> words;    // before "--"
  std::vector<std::string> command;  // after "--"
};

Args split_at_double_dash(int argc, char** argv) {
  Args args;
  bool after = false;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (!after && word == "--") {
      after = true;
    } else {
      (after ? args.command : args.words).push_back(word);
    }
  }
  return args;
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

std::string python_default() {
  if (auto configured = setting_string("ACSPEED_PYTHON")) return *configured;
  return ACSPEED_TESTBED_DEFAULT_PYTHON;
}

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

void print_cluster(const ClusterState& state) {
  const ClusterLayout layout = layout_of(state);
  notice(fmt::format("acspeed-testbed: cluster {} ({}), master {}:{}", state.name, state.profile,
             layout.nodes.front().address, state.master_port));
  for (const auto& node : layout.nodes) {
    notice(fmt::format("  node {}: {} {} in netns {}", node.rank, node.ifname, node.address, node.netns));
  }
}

struct LaunchOptions {
  bool pin = false;
  double timeout_s = 0;
  bool torchrun = false;
  std::string python;
};

// Starts the command in the given nodes and supervises it; returns its exit status.
int launch(const ClusterState& state, const std::vector<int>& ranks,
           const std::vector<std::string>& command, const LaunchOptions& options) {
  const ClusterLayout layout = layout_of(state);
  const Profile profile = parse_profile(state.profile);
  const auto cpus = allowed_cpus();
  if (options.pin && static_cast<int>(cpus.size()) < profile.nodes) {
    notice(fmt::format("acspeed-testbed: --pin with {} CPU(s) for {} nodes: nodes share CPUs", cpus.size(),
                       profile.nodes));
  }
  std::vector<pid_t> children;
  for (int rank : ranks) {
    process::SpawnOptions spawn_options;
    spawn_options.argv = options.torchrun
                             ? torchrun_command(layout, profile, rank, state.master_port,
                                                {options.python, command})
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

void add_launch_options(po::options_description& options, LaunchOptions& launch_options) {
  options.add_options()
      ("pin", po::bool_switch(&launch_options.pin),
       "pin each node's processes to its own block of CPUs (taskset), so nodes do not fight")
      ("timeout", po::value(&launch_options.timeout_s)->default_value(0),
       "stop the command after this many seconds (exit 124); 0 = no limit");
}

int report_problems(const std::vector<std::string>& problems) {
  for (const auto& problem : problems) notice(fmt::format("acspeed-testbed: {}", problem));
  return problems.empty() ? 0 : 1;
}

int cmd_run(const std::vector<std::string>& words, const std::vector<std::string>& command,
            const std::string& state_dir) {
  std::string profile_text;
  UpOptions up;
  LaunchOptions launch_options;
  po::options_description options("run PROFILE [options] -- CMD ...");
  options.add_options()
      ("profile", po::value(&profile_text)->required(), "NODESxPROCS[@RATE[/FLOWRATE]]")
      ("name", po::value(&up.name), "cluster name (1-12 of a-z0-9); default: random")
      ("master-port", po::value(&up.master_port)->default_value(29500), "MASTER_PORT on node 0")
      ("torchrun", po::bool_switch(&launch_options.torchrun),
       "CMD is a script: start it with torch.distributed.run in every node (c10d rendezvous on node 0)")
      ("python", po::value(&launch_options.python)->default_value(python_default()),
       "interpreter for --torchrun (default: ACSPEED_PYTHON, else the one acspeed was built with)");
  add_launch_options(options, launch_options);
  po::positional_options_description positional;
  positional.add("profile", 1);
  parse_command("run", words, options, positional);
  if (command.empty()) ACS_THROW(InvalidArgument, "run needs a command after '--'");
  up.profile = parse_profile(profile_text);
  up.state_dir = state_dir;
  up.owned = true;
  preflight();
  const ClusterState state = bring_up(up);
  print_cluster(state);
  int code = 1;
  try {
    std::vector<int> ranks;
    for (int rank = 0; rank < up.profile.nodes; ++rank) ranks.push_back(rank);
    code = launch(state, ranks, command, launch_options);
  } catch (...) {
    report_problems(tear_down(state, state_dir));
    throw;
  }
  const int teardown = report_problems(tear_down(state, state_dir));
  return code != 0 ? code : teardown;
}

int cmd_up(const std::vector<std::string>& words, const std::string& state_dir) {
  std::string profile_text;
  UpOptions up;
  po::options_description options("up PROFILE [options]");
  options.add_options()
      ("profile", po::value(&profile_text)->required(), "NODESxPROCS[@RATE[/FLOWRATE]]")
      ("name", po::value(&up.name), "cluster name (1-12 of a-z0-9); default: random")
      ("master-port", po::value(&up.master_port)->default_value(29500), "MASTER_PORT on node 0");
  po::positional_options_description positional;
  positional.add("profile", 1);
  parse_command("up", words, options, positional);
  up.profile = parse_profile(profile_text);
  up.state_dir = state_dir;
  up.owned = false;
  preflight();
  const ClusterState state = bring_up(up);
  print_cluster(state);
  fmt::print("{}\n", state.name);
  return 0;
}

int cmd_exec(const std::vector<std::string>& words, const std::vector<std::string>& command,
             const std::string& state_dir) {
  std::string name;
  int node = 0;
  LaunchOptions launch_options;
  po::options_description options("exec NAME NODE [options] -- CMD ...");
  options.add_options()
      ("name", po::value(&name)->required(), "cluster name (from `up`)")
      ("node", po::value(&node)->required(), "node rank, 0..NODES-1");
  add_launch_options(options, launch_options);
  po::positional_options_description positional;
  positional.add("name", 1).add("node", 1);
  parse_command("exec", words, options, positional);
  if (command.empty()) ACS_THROW(InvalidArgument, "exec needs a command after '--'");
  validate_cluster_name(name);
  preflight();
  const auto state = read_state(state_dir, name);
  if (!state) ACS_THROW(InvalidArgument, "no cluster '{}' (see `acspeed-testbed status`)", name);
  const int nodes = parse_profile(state->profile).nodes;
  if (node < 0 || node >= nodes) {
    ACS_THROW(InvalidArgument, "node {} is not in cluster '{}', which has nodes 0..{}", node, name, nodes - 1);
  }
  return launch(*state, {node}, command, launch_options);
}

int cmd_down(const std::vector<std::string>& words, const std::string& state_dir) {
  std::vector<std::string> names;
  bool all = false;
  po::options_description options("down [NAME ...] [--all]");
  options.add_options()
      ("names", po::value(&names)->multitoken(), "clusters to remove (live ones included)")
      ("all", po::bool_switch(&all),
       "remove every recorded cluster and every acst-* namespace, live or not (also other runs')");
  po::positional_options_description positional;
  positional.add("names", -1);
  parse_command("down", words, options, positional);
  if (all && !names.empty()) ACS_THROW(InvalidArgument, "down: give names or --all, not both");
  preflight();
  std::vector<ClusterState> targets;
  std::vector<std::string> orphans;
  if (all) {
    const auto namespaces = testbed_netns();
    targets = read_all_states(state_dir);
    for (const auto& ns : namespaces) orphans.push_back(ns);
  } else if (!names.empty()) {
    const auto namespaces = testbed_netns();
    for (const auto& name : names) {
      validate_cluster_name(name);
      if (auto state = read_state(state_dir, name)) {
        targets.push_back(std::move(*state));
        continue;
      }
      bool found = false;
      for (const auto& ns : namespaces) {
        if (cluster_of_netns(ns) == name) {
          orphans.push_back(ns);
          found = true;
        }
      }
      if (!found) ACS_THROW(InvalidArgument, "no cluster '{}' (see `acspeed-testbed status`)", name);
    }
  } else {
    auto report = find_stale(state_dir);
    targets = std::move(report.stale);
    // Not removed without a name: another --state-dir may own them.
    for (const auto& ns : report.orphan_netns) {
      notice(fmt::format("acspeed-testbed: namespace {} has no state file in {} (another --state-dir?); "
                 "remove it with `acspeed-testbed down {}`", ns, state_dir, cluster_of_netns(ns)));
    }
  }
  std::vector<std::string> problems;
  for (const auto& state : targets) {
    notice(fmt::format("acspeed-testbed: removing cluster {} ({})", state.name, state.profile));
    for (auto& problem : tear_down(state, state_dir)) problems.push_back(std::move(problem));
  }
  for (const auto& ns : orphans) {
    if (access(netns_path(ns).c_str(), F_OK) != 0) continue;  // went with its cluster above
    ClusterState orphan;
    orphan.name = cluster_of_netns(ns);
    orphan.netns = {ns};
    notice(fmt::format("acspeed-testbed: removing namespace {} (no state file)", ns));
    for (auto& problem : tear_down(orphan, state_dir)) problems.push_back(std::move(problem));
  }
  if (targets.empty() && orphans.empty()) notice("acspeed-testbed: nothing to remove");
  return report_problems(problems);
}

int cmd_status(const std::vector<std::string>& words, const std::string& state_dir) {
  std::vector<std::string> names;
  po::options_description options("status [NAME ...]");
  options.add_options()("names", po::value(&names)->multitoken(), "clusters to show (default: all)");
  po::positional_options_description positional;
  positional.add("names", -1);
  parse_command("status", words, options, positional);
  std::vector<ClusterState> states;
  if (names.empty()) {
    states = read_all_states(state_dir);
  } else {
    for (const auto& name : names) {
      validate_cluster_name(name);
      auto state = read_state(state_dir, name);
      if (!state) ACS_THROW(InvalidArgument, "no cluster '{}' (see `acspeed-testbed status`)", name);
      states.push_back(std::move(*state));
    }
  }
  fmt::print("{:<12} {:<22} {:>5} {:<18} {:<20}\n", "name", "profile", "nodes", "owner", "created (UTC)");
  for (const auto& state : states) {
    const std::string owner = state.owner_pid == 0 ? "up (until down)"
                              : owner_alive(state)  ? fmt::format("pid {}", state.owner_pid)
                                                    : fmt::format("STALE (pid {})", state.owner_pid);
    char created[32] = "";
    const time_t t = static_cast<time_t>(state.created_unix);
    std::tm tm{};
    gmtime_r(&t, &tm);
    std::strftime(created, sizeof(created), "%Y-%m-%d %H:%M:%S", &tm);
    fmt::print("{:<12} {:<22} {:>5} {:<18} {:<20}\n", state.name, state.profile, state.netns.size() - 1,
               owner, created);
    if (!names.empty()) {
      const ClusterLayout layout = layout_of(state);
      for (const auto& node : layout.nodes) {
        fmt::print("  node {}: {} {} netns {}\n", node.rank, node.ifname, node.address, node.netns);
      }
    }
  }
  if (names.empty()) {
    const auto report = find_stale(state_dir);
    for (const auto& ns : report.orphan_netns) fmt::print("orphan namespace {} (no state file here; remove: acspeed-testbed down {})\n", ns,
                 cluster_of_netns(ns));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Blocked from the start, awaited by the supervisor and checked between bring-up steps: a
  // Ctrl-C at any moment ends in a teardown, never in half a cluster.
  const process::SignalBlock block;
  signal(SIGPIPE, SIG_IGN);  // a tool that exits early must fail its step, not kill us
  try {
    const Args args = split_at_double_dash(argc, argv);
    std::string command;
    std::string state_dir;
    std::string level;
    po::options_description global("Global options");
    global.add_options()
        ("help,h", "this help")
        ("state-dir", po::value(&state_dir)->default_value(kDefaultStateDir), "where clusters are recorded")
        ("log-level", po::value(&level)->default_value(setting_string("ACSPEED_LOG_LEVEL").value_or("warn")),
         "debug, info, warn, error or off");
    po::options_description hidden;
    hidden.add_options()("command", po::value(&command))("rest", po::value<std::vector<std::string>>());
    po::options_description all;
    all.add(global).add(hidden);
    po::positional_options_description positional;
    positional.add("command", 1).add("rest", -1);
    po::variables_map vm;
    const auto parsed = po::command_line_parser(args.words).options(all).positional(positional)
                            .allow_unregistered().run();
    po::store(parsed, vm);
    po::notify(vm);
    set_log_level(parse_log_level(level));
    if (command.empty()) {
      std::cout << kOverview << "\n" << global << "\n";
      return vm.count("help") ? 0 : kExitUsage;
    }
    // Everything after the command word (its options and positionals) goes to the command.
    std::vector<std::string> words = po::collect_unrecognized(parsed.options, po::include_positional);
    words.erase(words.begin());
    if (vm.count("help")) words.push_back("--help");
    if (command == "run") return cmd_run(words, args.command, state_dir);
    if (command == "up") return cmd_up(words, state_dir);
    if (command == "exec") return cmd_exec(words, args.command, state_dir);
    if (command == "down") return cmd_down(words, state_dir);
    if (command == "status") return cmd_status(words, state_dir);
    ACS_THROW(InvalidArgument, "unknown command '{}': expected run, up, exec, down or status", command);
  } catch (const process::Interrupted& e) {
    notice(fmt::format("acspeed-testbed: {}; cluster removed", e.what()));
    return 128 + e.signo();
  } catch (const NotPermitted& e) {
    notice(fmt::format("acspeed-testbed: not permitted: {}", e.what()));
    return kExitNotPermitted;
  } catch (const InvalidArgument& e) {
    notice(fmt::format("acspeed-testbed: {}", e.what()));
    return kExitUsage;
  } catch (const po::error& e) {
    notice(fmt::format("acspeed-testbed: {} (see --help)", e.what()));
    return kExitUsage;
  } catch (const std::exception& e) {
    notice(fmt::format("acspeed-testbed: {}", e.what()));
    return 1;
  }
}
