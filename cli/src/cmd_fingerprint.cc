// acspeed-tune fingerprint: this machine's instance-type key and its details.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "acspeed/fingerprint.h"
#include "cli.h"
#include "table.h"

namespace acspeed::cli {

int cmd_fingerprint(const GlobalOptions&, const std::vector<std::string>& args) {
  po::options_description options("fingerprint options");
  options.add_options()("json", "print JSON instead of a table");
  po::variables_map vm;
  if (!parse_args("acspeed-tune fingerprint [--json]", options, {}, args, vm)) return kExitOk;
  // The versions the workers' torch reports, as every command shows them (job_versions.h).
  const PythonVersions job = job_versions_of_python();
  if (!job.problem.empty()) fmt::print(stderr, "note: {}\n", job.problem);
  const auto fp = job.problem.empty() ? fingerprint({job.versions}) : fingerprint();
  if (vm.count("json")) {
    nlohmann::json j = {{"instance_type", fp.instance_type},
                        {"detected_key", fp.detected_key},
                        {"explicit", fp.explicit_name},
                        {"details", fp.details}};
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }
  fmt::print("instance type: {}{}\n", fp.instance_type,
             fp.explicit_name ? fmt::format("  (from ACSPEED_INSTANCE_TYPE; detected: {})", fp.detected_key) : "");
  Table table({"DETAIL", "VALUE"});
  for (const auto& [key, value] : fp.details) table.add({key, value});
  table.print();
  return kExitOk;
}

}  // namespace acspeed::cli
