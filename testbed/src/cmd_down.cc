// acspeed-testbed down [NAME ...] [--all]: remove clusters (live ones too); without names only
// what crashed runs left (owner process gone).
#include "commands.h"

#include <unistd.h>

#include <fmt/format.h>

#include "acspeed/error.h"
#include "acspeed/process/supervise.h"
#include "acspeed/testbed/cluster.h"

namespace acspeed::testbed {

using process::notice;

int cmd_down(const CommandArgs& args) {
  const auto& words = args.words;
  const auto& state_dir = args.state_dir;
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

}  // namespace acspeed::testbed
