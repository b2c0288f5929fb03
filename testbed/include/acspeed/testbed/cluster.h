// Bringing an emulated cluster up and down on this machine (needs root: network namespaces).
#pragma once

#include <string>
#include <vector>

#include "acspeed/error.h"
#include "acspeed/testbed/layout.h"
#include "acspeed/testbed/profile.h"
#include "acspeed/testbed/state.h"

namespace acspeed::testbed {

// The machine does not let us make network namespaces (not root, no CAP_NET_ADMIN/CAP_SYS_ADMIN,
// a container without netns, iproute2 missing). acspeed-testbed exits 77 for it.
class NotPermitted : public Error {
 public:
  using Error::Error;
};
inline constexpr int kExitNotPermitted = 77;

// Throws NotPermitted with the reason and what to do; checks by really creating a namespace in a
// short-lived child, so a container that forbids it is caught here rather than halfway through.
void preflight();

struct UpOptions {
  Profile profile;
  std::string name;          // empty: a random free name
  int master_port = 29500;   // every cluster has its own addresses, so the usual port is free
  std::string state_dir = kDefaultStateDir;
  bool owned = true;         // true: this process owns it (run/exec); false: `up`, lives until `down`
};

// Records the cluster, then creates and shapes it. On any failure or interruption it removes
// what it made and rethrows.
ClusterState bring_up(const UpOptions& options);

// Stops every process left in the cluster's namespaces (SIGTERM, then SIGKILL after grace_s),
// deletes the namespaces and the state file. Best effort: returns the problems (empty = clean).
std::vector<std::string> tear_down(const ClusterState& state, const std::string& state_dir,
                                   double grace_s = 3.0);

ClusterLayout layout_of(const ClusterState& state);

// Processes (other than this one) whose network namespace is /run/netns/NETNS.
std::vector<pid_t> pids_in_netns(const std::string& netns);
// Namespaces under /run/netns that acspeed-testbed made (prefix acst-).
std::vector<std::string> testbed_netns();

// What `down` without names looks at: stale clusters (owner gone), which it removes, and
// namespaces with our prefix that no state file in state_dir covers, which it only reports
// (another --state-dir may own them). Live clusters are never touched.
struct StaleReport {
  std::vector<ClusterState> stale;
  std::vector<std::string> orphan_netns;
};
StaleReport find_stale(const std::string& state_dir);

}  // namespace acspeed::testbed
