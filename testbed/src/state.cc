#include "acspeed/testbed/state.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "acspeed/error.h"
#include "acspeed/json_io.h"
#include "acspeed/process/supervise.h"
#include "acspeed/testbed/layout.h"

namespace acspeed::testbed {

std::string state_path(const std::string& dir, const std::string& name) {
  return dir + "/" + name + ".json";
}

void to_json(nlohmann::json& j, const ClusterState& s) {
  j = {{"version", kStateVersion},     {"name", s.name},
       {"profile", s.profile},         {"netns", s.netns},
       {"master_port", s.master_port}, {"owner_pid", s.owner_pid},
       {"owner_start_ticks", s.owner_start_ticks},
       {"created_unix", s.created_unix}};
}

void from_json(const nlohmann::json& j, ClusterState& s) {
  using json_io::required;
  json_io::require_object(j, "a state file");
  const int version = required<int>(j, "version");
  if (version != kStateVersion) {
    ACS_THROW(InvalidArgument, "version {} is not the version {} this acspeed-testbed reads", version, kStateVersion);
  }
  s.name = required<std::string>(j, "name");
  validate_cluster_name(s.name);
  s.profile = required<std::string>(j, "profile");
  s.netns = required<std::vector<std::string>>(j, "netns");
  for (const auto& ns : s.netns) {
    if (cluster_of_netns(ns) != s.name) {
      ACS_THROW(InvalidArgument, "it lists namespace '{}', which is not one of cluster '{}'", ns, s.name);
    }
  }
  s.master_port = required<int>(j, "master_port");
  s.owner_pid = required<pid_t>(j, "owner_pid");
  s.owner_start_ticks = required<uint64_t>(j, "owner_start_ticks");
  s.created_unix = required<int64_t>(j, "created_unix");
}

std::string state_text(const ClusterState& state) { return nlohmann::json(state).dump(2) + "\n"; }

ClusterState state_from_json(const std::string& text, const std::string& source) {
  try {
    return json_io::parse(text, "it").get<ClusterState>();
  } catch (const InvalidArgument& e) {
    ACS_THROW(Error, "state file {} is not readable: {}", source, e.what());
  }
}

bool create_state(const std::string& dir, const ClusterState& state) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    ACS_THROW(Error, "cannot create the state folder {}: {}", dir, std::strerror(errno));
  }
  const std::string path = state_path(dir, state.name);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) return false;
    ACS_THROW(Error, "cannot create {}: {}", path, std::strerror(errno));
  }
  const std::string text = state_text(state);
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int saved = errno;
  close(fd);
  if (!ok) {
    unlink(path.c_str());
    ACS_THROW(Error, "cannot write {}: {}", path, std::strerror(saved));
  }
  return true;
}

std::optional<ClusterState> read_state(const std::string& dir, const std::string& name) {
  const std::string path = state_path(dir, name);
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return state_from_json(text.str(), path);
}

std::vector<ClusterState> read_all_states(const std::string& dir) {
  std::vector<ClusterState> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (const dirent* entry = readdir(d)) {
    const std::string file = entry->d_name;
    const std::string suffix = ".json";
    if (file.size() <= suffix.size() || file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    try {
      if (auto state = read_state(dir, file.substr(0, file.size() - suffix.size()))) {
        out.push_back(std::move(*state));
      }
    } catch (const Error& e) {
      process::notice(std::string("acspeed-testbed: skipping ") + e.what());
    }
  }
  closedir(d);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

void remove_state(const std::string& dir, const std::string& name) {
  const std::string path = state_path(dir, name);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    ACS_THROW(Error, "cannot remove {}: {}", path, std::strerror(errno));
  }
}

std::optional<uint64_t> process_start_ticks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  // Field 2 (comm) may hold spaces and parentheses: count fields after the last ')'.
  const auto close_paren = line.rfind(')');
  if (close_paren == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close_paren + 2));
  std::string field;
  for (int index = 3; rest >> field; ++index) {
    if (index == 22) return std::stoull(field);
  }
  return std::nullopt;
}

bool owner_alive(const ClusterState& state) {
  if (state.owner_pid <= 0) return false;
  const auto ticks = process_start_ticks(state.owner_pid);
  return ticks && *ticks == state.owner_start_ticks;
}

bool is_stale(const ClusterState& state) { return state.owner_pid > 0 && !owner_alive(state); }

}  // namespace acspeed::testbed
