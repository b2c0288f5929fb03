// The one registry of ACSPEED_* environment settings: name, type, default and description.
// Values are parsed strictly (a bad value is an InvalidArgument naming the variable, the value and
// what is accepted); a value taken from the environment is logged once at info level.
// `acspeed-tune env` lists the registry.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace acspeed {

enum class SettingType { kBool, kInt, kFloat, kString, kPath, kChoice };

struct SettingSpec {
  std::string name;           // e.g. "ACSPEED_DB"
  SettingType type;
  std::string default_value;  // as text; empty = unset / derived (see description)
  std::string description;
  std::vector<std::string> choices;  // kChoice only
  int64_t min_int = INT64_MIN;       // kInt only
  int64_t max_int = INT64_MAX;
};

const std::vector<SettingSpec>& all_settings();
// Throws InvalidArgument for a name that is not in the registry (a programming error made loud).
const SettingSpec& setting_spec(std::string_view name);
std::string_view setting_type_name(SettingType type);

// The raw value from the environment (nullopt when unset or empty).
std::optional<std::string> setting_raw(std::string_view name);
// Every setting that is set in the environment, name -> raw value (what versioned JSON output and
// sessions record; never the whole environment).
std::map<std::string, std::string> settings_in_environment();

// Typed accessors: the environment's value if set, else the registry default; nullopt when neither.
bool setting_bool(std::string_view name);
std::optional<int64_t> setting_int(std::string_view name);
std::optional<double> setting_float(std::string_view name);
std::optional<std::string> setting_string(std::string_view name);

// Strict parsers shared with the CLI; `what` names the source in error messages.
bool parse_bool(std::string_view what, std::string_view text);
int64_t parse_int(std::string_view what, std::string_view text, int64_t min_value = INT64_MIN,
                  int64_t max_value = INT64_MAX);
double parse_float(std::string_view what, std::string_view text);

}  // namespace acspeed
