// The session a command reads: --session ID, else the latest (optionally for one instance type).
#include <fmt/format.h>

#include "acspeed/error.h"
#include "cli.h"

namespace acspeed::cli {

SessionRecord pick_session(const Store& store, const po::variables_map& vm) {
  const std::optional<int64_t> wanted = id_option(vm, "session", "--session", kSessionIds);  // a bad ID fails before any read
  const auto sessions = store.sessions();
  const std::string where = fmt::format("store {}{}", store.path(), store.exists() ? "" : " (the store does not exist yet)");
  if (sessions.empty()) {
    ACS_THROW(Error, "no tuning session in {}: run `acspeed-tune --model NAME` first", where);
  }
  const std::optional<std::string> instance =
      vm.count("instance") ? std::optional<std::string>(vm["instance"].as<std::string>()) : std::nullopt;
  if (wanted) {
    const int64_t id = *wanted;
    for (const auto& s : sessions) {
      if (s.id != id) continue;
      if (instance && s.instance_type != *instance) {
        ACS_THROW(Error, "session {} was tuned on instance type '{}', not '{}'", id, s.instance_type, *instance);
      }
      return s;
    }
    ACS_THROW(Error, "no tuning session {} in {} (sessions {} to {}): {}", id, where, sessions.front().id,
              sessions.back().id, give_id(kSessionIds));
  }
  for (auto it = sessions.rbegin(); it != sessions.rend(); ++it) {
    if (!instance || it->instance_type == *instance) return *it;
  }
  ACS_THROW(Error, "no tuning session for instance type '{}' in {}", *instance, where);
}

}  // namespace acspeed::cli
