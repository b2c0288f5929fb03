// acspeed-testbed status [NAME ...]: list clusters, their nodes and addresses.
#include "commands.h"

#include <ctime>

#include <fmt/format.h>

#include "acspeed/error.h"
#include "acspeed/testbed/cluster.h"

namespace acspeed::testbed {

int cmd_status(const CommandArgs& args) {
  const auto& words = args.words;
  const auto& state_dir = args.state_dir;
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

}  // namespace acspeed::testbed
