// acspeed-testbed: an emulated multi-node cluster on one machine (network namespaces joined by a
// bridge, each node's link capped with HTB) for tuning, testing and benchmarking communication.
#include <signal.h>

#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "acspeed/log.h"
#include "acspeed/process/signals.h"
#include "acspeed/process/supervise.h"
#include "acspeed/settings.h"
#include "acspeed/strings.h"
#include "acspeed/testbed/cluster.h"
#include "commands.h"

using namespace acspeed;
using namespace acspeed::testbed;
using acspeed::process::notice;

namespace {

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
    std::vector<std::string> names;
    for (const auto& entry : commands()) {
      if (entry.name == command) return entry.run({words, args.command, state_dir});
      names.push_back(entry.name);
    }
    ACS_THROW(InvalidArgument, "unknown command '{}': expected one of {}", command, join(names));
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
