// acspeed-testbed run PROFILE [options] -- CMD ...: bring a cluster up, run CMD once in every node,
// tear the cluster down when CMD ends or on Ctrl-C/SIGTERM; exits with CMD's status.
#include "commands.h"

#include "acspeed/error.h"
#include "acspeed/python_interpreter.h"
#include "acspeed/testbed/cluster.h"

namespace acspeed::testbed {

int cmd_run(const CommandArgs& args) {
  const auto& words = args.words;
  const auto& command = args.command;
  const auto& state_dir = args.state_dir;
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
      ("python", po::value(&launch_options.python)->default_value(python_interpreter()),
       "interpreter for --torchrun (default: ACSPEED_PYTHON, else the one of acspeed's environment)");
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

}  // namespace acspeed::testbed
