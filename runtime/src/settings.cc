#include "acspeed/settings.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <set>

#include "acspeed/config.h"
#include "acspeed/error.h"
#include "acspeed/log.h"
#include "acspeed/precision.h"
#include "acspeed/strings.h"

namespace acspeed {
namespace {

std::vector<SettingSpec> make_registry() {
  using T = SettingType;
  return {
      {"ACSPEED_DB", T::kPath, "",
       "SQLite store of tuning sessions and decisions; default $XDG_DATA_HOME/acspeed/acspeed.db "
       "(~/.local/share/acspeed/acspeed.db)"},
      {"ACSPEED_INSTANCE_TYPE", T::kString, "",
       "Instance-type name to key decisions by (e.g. ecs.ebmgn7t.32xlarge or an emulated-cluster "
       "profile); overrides the detected hardware key"},
      {"ACSPEED_PYTHON", T::kPath, "",
       "Python interpreter acspeed-tune starts its trial workers with; default: the one of the "
       "environment acspeed is installed in, else python3 on PATH"},
      {"ACSPEED_CONFIG", T::kPath, "",
       "A config JSON file to apply whatever instance type it was tuned on (still validated)"},
      {"ACSPEED_DISABLE", T::kBool, "0", "1 turns `import acspeed` off: DDP runs untouched"},
      {"ACSPEED_ONLINE", T::kChoice, "",
       "Online tuning inside the training job (docs/online.md): unset tunes the first DDP model of a job of "
       ">= 2 ranks for which no decision is stored; 0 never tunes online; 1 tunes also over a stored "
       "decision or ACSPEED_CONFIG",
       {"0", "1"}},
      {"ACSPEED_SHARE_GPUS", T::kBool, "0",
       "1 lets a node run more ranks than it has GPUs (acspeed-tune --share-gpus; a training job under "
       "`import acspeed`): device = local rank mod GPUs, each rank its own NCCL host identity; decisions "
       "tuned so apply only to jobs that share GPUs"},
      {"ACSPEED_STRICT", T::kBool, "0",
       "1 turns acspeed's warnings in a training job (bad config, unreadable store) into errors"},
      {"ACSPEED_PRECISION", T::kChoice, "",
       "Precision of the training job, used in the lookup key (else any precision matches)",
       precision_names()},
      {"ACSPEED_BUSY_TIMEOUT_MS", T::kInt, "15000",
       "How long (ms) a store access waits for a lock another process holds: past it a tuner's write "
       "fails, and a training job's lookup warns once and runs with DDP's defaults",
       {}, 0, 3600000},
      {"ACSPEED_NCCL_RULES", T::kPath, "",
       "Config JSON file the NCCL tuner plugin reads its rules from (set by `import acspeed`)"},
      {"ACSPEED_LOG_LEVEL", T::kChoice, "warn", "Log level of acspeed's C++ parts",
       {"debug", "info", "warn", "error", "off"}},
      {"ACSPEED_BUCKET_MB", T::kFloat, "",
       "Pins DDP's bucket_cap_mb (MiB): applied over the stored config and not searched by the tuner"},
      {"ACSPEED_ALGORITHM", T::kChoice, "",
       "Pins the gradient communication algorithm: applied over the stored config and not searched",
       algorithm_names()},
      {"ACSPEED_STREAMS", T::kInt, "",
       "Pins the number of communication streams (process groups): applied over the stored config "
       "and not searched",
       {}, 1, kMaxStreams},
      {"ACSPEED_COMPRESSION", T::kChoice, "",
       "Pins gradient compression: applied over the stored config and not searched",
       compression_names()},
      {"ACSPEED_POWERSGD_RANK", T::kInt, "",
       "Pins the rank of PowerSGD compression's factors (clamped per tensor to the matrix's smaller side): "
       "applied over the stored config and not searched",
       {}, 1, kMaxPowerSgdRank},
      {"ACSPEED_NCCL_SOCKETS", T::kString, "",
       "Pins NCCL's sockets over TCP, THREADSxSOCKETS per thread (e.g. 2x4, product at most 64) or 0 for "
       "NCCL's choice: `import acspeed` sets NCCL_SOCKET_NTHREADS/NCCL_NSOCKS_PERTHREAD from it instead of the "
       "store (a variable the user set stays), and the tuner does not search them"},
  };
}

void note_from_environment(const std::string& name, const std::string& value) {
  static std::mutex mu;
  static std::set<std::string> logged;
  std::lock_guard<std::mutex> lock(mu);
  if (logged.insert(name).second) ACS_INFO("{}={} (from the environment)", name, value);
}

// The environment's value, else the default; validated against the spec.
std::optional<std::string> effective(const SettingSpec& spec) {
  auto raw = setting_raw(spec.name);
  if (raw) {
    note_from_environment(spec.name, *raw);
  } else if (!spec.default_value.empty()) {
    raw = spec.default_value;
  } else {
    return std::nullopt;
  }
  if (spec.type == SettingType::kChoice) {
    for (const auto& choice : spec.choices) {
      if (*raw == choice) return raw;
    }
    ACS_THROW(InvalidArgument, "{}='{}' is not one of {}", spec.name, *raw, join(spec.choices));
  }
  return raw;
}

}  // namespace

const std::vector<SettingSpec>& all_settings() {
  static const std::vector<SettingSpec> registry = make_registry();
  return registry;
}

std::map<std::string, std::string> settings_in_environment() {
  std::map<std::string, std::string> out;
  for (const auto& spec : all_settings()) {
    if (auto value = setting_raw(spec.name)) out[spec.name] = *value;
  }
  return out;
}

const SettingSpec& setting_spec(std::string_view name) {
  for (const auto& spec : all_settings()) {
    if (spec.name == name) return spec;
  }
  ACS_THROW(InvalidArgument, "'{}' is not an acspeed setting", name);
}

std::string_view setting_type_name(SettingType type) {
  switch (type) {
    case SettingType::kBool: return "bool";
    case SettingType::kInt: return "int";
    case SettingType::kFloat: return "float";
    case SettingType::kString: return "string";
    case SettingType::kPath: return "path";
    case SettingType::kChoice: return "choice";
  }
  return "?";
}

std::optional<std::string> setting_raw(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

bool parse_bool(std::string_view what, std::string_view text) {
  if (text == "1" || text == "true" || text == "yes" || text == "on") return true;
  if (text == "0" || text == "false" || text == "no" || text == "off") return false;
  ACS_THROW(InvalidArgument, "{}='{}' is not a boolean (accepted: 1, 0, true, false, yes, no, on, off)",
            what, text);
}

int64_t parse_int(std::string_view what, std::string_view text, int64_t min_value,
                  int64_t max_value) {
  std::string s(text);
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE) {
    ACS_THROW(InvalidArgument, "{}='{}' is not an integer", what, text);
  }
  if (value < min_value || value > max_value) {
    ACS_THROW(InvalidArgument, "{}={} is out of range (accepted: {} to {})", what, value, min_value,
              max_value);
  }
  return value;
}

double parse_float(std::string_view what, std::string_view text) {
  std::string s(text);
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(value)) {
    ACS_THROW(InvalidArgument, "{}='{}' is not a finite number", what, text);
  }
  return value;
}

bool setting_bool(std::string_view name) {
  const auto& spec = setting_spec(name);
  auto value = effective(spec);
  return value ? parse_bool(spec.name, *value) : false;
}

std::optional<int64_t> setting_int(std::string_view name) {
  const auto& spec = setting_spec(name);
  auto value = effective(spec);
  if (!value) return std::nullopt;
  return parse_int(spec.name, *value, spec.min_int, spec.max_int);
}

std::optional<double> setting_float(std::string_view name) {
  const auto& spec = setting_spec(name);
  auto value = effective(spec);
  if (!value) return std::nullopt;
  return parse_float(spec.name, *value);
}

std::optional<std::string> setting_string(std::string_view name) {
  return effective(setting_spec(name));
}

}  // namespace acspeed
