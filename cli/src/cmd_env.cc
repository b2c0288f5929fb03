// acspeed-tune env: the registry of ACSPEED_* settings.
#include <fmt/format.h>

#include "acspeed/settings.h"
#include "acspeed/strings.h"
#include "cli.h"
#include "table.h"

namespace acspeed::cli {

int cmd_env(const GlobalOptions&, const std::vector<std::string>& args) {
  po::options_description options("env options");
  po::variables_map vm;
  if (!parse_args("acspeed-tune env", options, {}, args, vm)) return kExitOk;
  Table table({"NAME", "TYPE", "DEFAULT", "CURRENT", "DESCRIPTION"});
  for (const auto& spec : all_settings()) {
    std::string type(setting_type_name(spec.type));
    if (!spec.choices.empty()) {
      type = join(spec.choices, "|");
    } else if (spec.type == SettingType::kInt && spec.min_int != INT64_MIN) {
      type = fmt::format("int {}..{}", spec.min_int, spec.max_int);
    }
    const auto current = setting_raw(spec.name);
    table.add({spec.name, type, spec.default_value.empty() ? "-" : spec.default_value,
               current ? *current : "(unset)", spec.description});
  }
  table.print();
  return kExitOk;
}

}  // namespace acspeed::cli
