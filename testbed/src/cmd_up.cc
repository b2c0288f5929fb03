// acspeed-testbed up PROFILE [--name NAME]: bring a cluster up and leave it (prints its name).
#include "commands.h"

#include <fmt/format.h>

#include "acspeed/testbed/cluster.h"

namespace acspeed::testbed {

int cmd_up(const CommandArgs& args) {
  const auto& words = args.words;
  const auto& state_dir = args.state_dir;
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

}  // namespace acspeed::testbed
