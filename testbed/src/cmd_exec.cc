// acspeed-testbed exec NAME NODE [options] -- CMD: run CMD in one node of a cluster made by `up`.
#include "commands.h"

#include "acspeed/error.h"
#include "acspeed/testbed/cluster.h"

namespace acspeed::testbed {

int cmd_exec(const CommandArgs& args) {
  const auto& words = args.words;
  const auto& command = args.command;
  const auto& state_dir = args.state_dir;
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

}  // namespace acspeed::testbed
