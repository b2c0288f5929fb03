// acspeed-tune sessions [--instance KEY] [--json]: the tuning sessions in the store, with the IDs that
// `acspeed-tune report --session ID` and `acspeed-tune --resume ID` take. Reads only.
#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "acspeed/error.h"
#include "cli.h"
#include "table.h"

namespace acspeed::cli {
namespace {

std::string model_text(const SessionRecord& s) { return s.model_name.empty() ? s.model_signature : s.model_name; }

std::string sessions_json(const std::vector<SessionRecord>& sessions) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& s : sessions) {
    list.push_back({{"id", s.id},
                    {"kind", to_string(s.kind)},
                    {"status", to_string(s.status)},
                    {"model_name", s.model_name},
                    {"model_signature", s.model_signature},
                    {"precision", s.precision},
                    {"world_size", s.world_size},
                    {"nnodes", s.nnodes},
                    {"instance_type", s.instance_type},
                    {"started_at", s.started_at},
                    {"finished_at", s.finished_at.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.finished_at)}});
  }
  return nlohmann::json{{"format", "acspeed-sessions"}, {"version", 1}, {"sessions", list}}.dump(2);
}

}  // namespace

int cmd_sessions(const GlobalOptions& global, const std::vector<std::string>& args) {
  const std::string usage = "acspeed-tune sessions [--instance KEY] [--json]";
  po::options_description options("sessions options");
  options.add_options()("instance", po::value<std::string>(), "only sessions tuned on this instance type")(
      "json", "print a JSON document instead of a table");
  po::variables_map vm;
  if (!parse_args(usage, options, {}, args, vm)) return kExitOk;
  auto store = open_store(global, false);
  std::vector<SessionRecord> sessions = store->sessions();
  if (vm.count("instance")) {
    const std::string instance = vm["instance"].as<std::string>();
    sessions.erase(std::remove_if(sessions.begin(), sessions.end(),
                                  [&](const SessionRecord& s) { return s.instance_type != instance; }),
                   sessions.end());
  }
  if (vm.count("json")) {
    fmt::print("{}\n", sessions_json(sessions));
    return kExitOk;
  }
  if (sessions.empty()) {
    fmt::print("no tuning sessions in {}{}\n", store->path(), store->exists() ? "" : " (the store does not exist yet)");
    return kExitOk;
  }
  Table table({"ID", "KIND", "STATUS", "MODEL", "PRECISION", "WORLD", "NODES", "INSTANCE TYPE", "STARTED (UTC)",
               "FINISHED (UTC)"});
  for (const auto& s : sessions) {
    table.add({std::to_string(s.id), std::string(to_string(s.kind)), std::string(to_string(s.status)), model_text(s),
               s.precision, std::to_string(s.world_size), std::to_string(s.nnodes), s.instance_type, s.started_at,
               s.finished_at.empty() ? "-" : s.finished_at});
  }
  table.print();
  fmt::print("\nreport one: acspeed-tune report --session ID; continue one that did not finish: "
             "acspeed-tune --resume ID\n");
  return kExitOk;
}

}  // namespace acspeed::cli
