// What acspeed-testbed records about each cluster it made, so `status` can list them and `down`
// can remove what a crashed run left: one JSON file per cluster in the state folder
// (default /run/acspeed-testbed, a tmpfs that, like the namespaces, does not outlive a reboot).
// The file is created (O_EXCL) before the first namespace, so every namespace of a live cluster
// is covered by a file, and two runs can never pick the same name.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace acspeed::testbed {

inline constexpr int kStateVersion = 1;
inline constexpr const char* kDefaultStateDir = "/run/acspeed-testbed";

struct ClusterState {
  std::string name;
  std::string profile;      // canonical profile text
  std::vector<std::string> netns;  // every namespace, in teardown order
  int master_port = 0;
  // The `run`/`exec` process that tears the cluster down when it ends; 0 for a cluster made by
  // `up`, which stays until `down NAME`.
  pid_t owner_pid = 0;
  uint64_t owner_start_ticks = 0;  // the owner's start time (/proc/PID/stat), against pid reuse
  int64_t created_unix = 0;
};

std::string state_path(const std::string& dir, const std::string& name);
// The state file's object, for nlohmann::json (ADL); from_json throws InvalidArgument naming a
// missing or mistyped field, an unknown version or a namespace of another cluster.
void to_json(nlohmann::json& j, const ClusterState& state);
void from_json(const nlohmann::json& j, ClusterState& state);
// The file's text, and back: throws Error naming `source` when the text is not a state file of a
// known version.
std::string state_text(const ClusterState& state);
ClusterState state_from_json(const std::string& text, const std::string& source);

// Creates the file exclusively (and the folder, mode 0755); false when the name is taken.
bool create_state(const std::string& dir, const ClusterState& state);
std::optional<ClusterState> read_state(const std::string& dir, const std::string& name);
// Every readable state file, by name; unreadable ones are reported with a warning and skipped.
std::vector<ClusterState> read_all_states(const std::string& dir);
void remove_state(const std::string& dir, const std::string& name);

// Start time of a process in clock ticks since boot; nullopt when it does not exist.
std::optional<uint64_t> process_start_ticks(pid_t pid);
// A cluster is stale when its owner is gone (a `run` that was killed with SIGKILL, a crash).
bool owner_alive(const ClusterState& state);
bool is_stale(const ClusterState& state);

}  // namespace acspeed::testbed
