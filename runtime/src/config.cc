#include "acspeed/config.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "acspeed/comm_methods.h"
#include "acspeed/error.h"
#include "acspeed/json_io.h"
#include "acspeed/settings.h"
#include "acspeed/strings.h"

namespace acspeed {
namespace {

using nlohmann::json;

bool contains(const std::vector<std::string>& names, std::string_view value) {
  return std::find(names.begin(), names.end(), value) != names.end();
}

void check_choice(std::string_view field, const std::string& value,
                  const std::vector<std::string>& names) {
  if (!contains(names, value)) {
    ACS_THROW(InvalidArgument, "{} '{}' is not one of {}", field, value, join(names));
  }
}

std::string format_mb(double mb) { return fmt::format("{:g}", mb); }

void warn_unknown(const json& object, const std::vector<std::string>& known, const std::string& where,
                  std::vector<std::string>* warnings) {
  for (const auto& item : object.items()) {
    if (!contains(known, item.key()) && warnings != nullptr) {
      warnings->push_back(fmt::format("unknown config key '{}{}' ignored", where, item.key()));
    }
  }
}

}  // namespace

const std::vector<std::string>& algorithm_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& a : algorithms()) out.emplace_back(a.name);
    return out;
  }();
  return names;
}
const std::vector<std::string>& compression_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& c : compressions()) out.emplace_back(c.name);
    return out;
  }();
  return names;
}
const std::vector<std::string>& nccl_collective_names() {
  static const std::vector<std::string> names = {"allreduce", "allgather", "reducescatter",
                                                 "broadcast", "reduce", "any"};
  return names;
}
const std::vector<std::string>& nccl_algorithm_names() {
  static const std::vector<std::string> names = {"tree", "ring", "collnet_direct", "collnet_chain",
                                                 "nvls", "nvls_tree", "pat", "any"};
  return names;
}
const std::vector<std::string>& nccl_protocol_names() {
  static const std::vector<std::string> names = {"ll", "ll128", "simple", "any"};
  return names;
}

std::string_view to_string(Algorithm value) { return algorithm_names()[static_cast<size_t>(value)]; }
std::string_view to_string(Compression value) {
  return compression_names()[static_cast<size_t>(value)];
}

Algorithm parse_algorithm(std::string_view text) {
  const auto& names = algorithm_names();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == text) return static_cast<Algorithm>(i);
  }
  ACS_THROW(InvalidArgument, "algorithm '{}' is not one of {}", text, join(names));
}

Compression parse_compression(std::string_view text) {
  const auto& names = compression_names();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == text) return static_cast<Compression>(i);
  }
  ACS_THROW(InvalidArgument, "compression '{}' is not one of {}", text, join(names));
}

namespace {

constexpr std::string_view kNcclSocketsAccepted =
    "'0' for NCCL's choice, or THREADSxSOCKETS such as 2x4: threads 1 to 16, sockets per thread 1 to 64, "
    "threads x sockets at most 64";

}  // namespace

void NcclSockets::validate() const {
  if (threads < 1 || threads > kMaxNcclSocketThreads || per_thread < 1 || per_thread > kMaxNcclSockets ||
      threads * per_thread > kMaxNcclSockets) {
    ACS_THROW(InvalidArgument, "nccl_sockets {}x{} is out of range (accepted: {})", threads, per_thread,
              kNcclSocketsAccepted);
  }
}

bool NcclSockets::operator==(const NcclSockets& o) const {
  return threads == o.threads && per_thread == o.per_thread;
}

std::string to_string(const std::optional<NcclSockets>& value) {
  return value ? fmt::format("{}x{}", value->threads, value->per_thread) : "0";
}

std::optional<NcclSockets> parse_nccl_sockets(std::string_view what, std::string_view text) {
  if (text == "0") return std::nullopt;
  const auto x = text.find('x');
  const auto digits = [](std::string_view part) {
    return !part.empty() && part.size() <= 3 && part.find_first_not_of("0123456789") == std::string_view::npos;
  };
  if (x == std::string_view::npos || !digits(text.substr(0, x)) || !digits(text.substr(x + 1))) {
    ACS_THROW(InvalidArgument, "{} '{}' is not accepted (accepted: {})", what, text, kNcclSocketsAccepted);
  }
  NcclSockets value{std::stoi(std::string(text.substr(0, x))), std::stoi(std::string(text.substr(x + 1)))};
  if (value.threads < 1 || value.per_thread < 1 || value.threads > kMaxNcclSocketThreads ||
      value.sockets() > kMaxNcclSockets) {
    ACS_THROW(InvalidArgument, "{} '{}' is out of range (accepted: {})", what, text, kNcclSocketsAccepted);
  }
  return value;
}

std::vector<std::pair<std::string, std::string>> nccl_socket_variables(const NcclSockets& value) {
  return {{"NCCL_SOCKET_NTHREADS", std::to_string(value.threads)},
          {"NCCL_NSOCKS_PERTHREAD", std::to_string(value.per_thread)}};
}

bool NcclRule::operator==(const NcclRule& o) const {
  return collective == o.collective && min_bytes == o.min_bytes && max_bytes == o.max_bytes &&
         algorithm == o.algorithm && protocol == o.protocol && channels == o.channels &&
         chunk_bytes == o.chunk_bytes;
}

bool CommConfig::needs_comm_hook() const {
  return algorithm != Algorithm::kAllreduce || streams != 1 || info(compression).form != WireForm::kAsIs;
}

bool CommConfig::is_default() const {
  return !bucket_cap_mb && !first_bucket_mb && !gradient_as_bucket_view && !needs_comm_hook() &&
         nccl_rules.empty() && !nccl_sockets;
}

void CommConfig::validate() const {
  auto check_mb = [](const char* field, const std::optional<double>& mb) {
    if (mb && !(std::isfinite(*mb) && *mb > 0 && *mb <= kMaxBucketMb)) {
      ACS_THROW(InvalidArgument, "{} {} is out of range (accepted: a size in MiB > 0 and <= {:g})",
                field, *mb, kMaxBucketMb);
    }
  };
  check_mb("bucket_cap_mb", bucket_cap_mb);
  check_mb("first_bucket_mb", first_bucket_mb);
  if (streams < 1 || streams > kMaxStreams) {
    ACS_THROW(InvalidArgument, "streams {} is out of range (accepted: 1 to {})", streams, kMaxStreams);
  }
  if (powersgd_rank < 1 || powersgd_rank > kMaxPowerSgdRank) {
    ACS_THROW(InvalidArgument,
              "powersgd_rank {} is out of range (accepted: an integer 1 to {}; the hook clamps it per tensor to "
              "the matrix's smaller side)",
              powersgd_rank, kMaxPowerSgdRank);
  }
  if (powersgd_start_step < 0) {
    ACS_THROW(InvalidArgument, "powersgd_start_step {} is negative (accepted: an integer >= 0)", powersgd_start_step);
  }
  for (size_t i = 0; i < nccl_rules.size(); ++i) {
    const auto& rule = nccl_rules[i];
    const auto where = fmt::format("nccl_rules[{}]", i);
    check_choice(where + ".collective", rule.collective, nccl_collective_names());
    check_choice(where + ".algorithm", rule.algorithm, nccl_algorithm_names());
    check_choice(where + ".protocol", rule.protocol, nccl_protocol_names());
    if (rule.min_bytes < 0 || rule.max_bytes <= rule.min_bytes) {
      ACS_THROW(InvalidArgument,
                "{} byte range [{}, {}) is empty or negative (accepted: 0 <= min_bytes < max_bytes)",
                where, rule.min_bytes, rule.max_bytes);
    }
    if (rule.channels < 0 || rule.channels > kMaxNcclChannels) {
      ACS_THROW(InvalidArgument, "{}.channels {} is out of range (accepted: 0 to {}, 0 = NCCL's choice)",
                where, rule.channels, kMaxNcclChannels);
    }
    if (rule.chunk_bytes && (*rule.chunk_bytes < kMinNcclChunkBytes || *rule.chunk_bytes > kMaxNcclChunkBytes)) {
      ACS_THROW(InvalidArgument,
                "{}.chunk_bytes {} is out of range (accepted: {} to {} bytes, or absent/null = NCCL's choice)", where,
                *rule.chunk_bytes, kMinNcclChunkBytes, kMaxNcclChunkBytes);
    }
  }
  if (nccl_sockets) nccl_sockets->validate();
}

std::string CommConfig::describe() const {
  if (is_default()) return "DDP defaults";
  std::vector<std::string> parts;
  if (bucket_cap_mb) parts.push_back(fmt::format("bucket {} MiB", format_mb(*bucket_cap_mb)));
  if (first_bucket_mb) parts.push_back(fmt::format("first bucket {} MiB", format_mb(*first_bucket_mb)));
  if (gradient_as_bucket_view) {
    parts.push_back(fmt::format("gradient_as_bucket_view={}", *gradient_as_bucket_view));
  }
  parts.emplace_back(to_string(algorithm));
  if (streams != 1) parts.push_back(fmt::format("{} streams", streams));
  if (info(compression).ranked) {
    parts.push_back(fmt::format("{} rank {}", to_string(compression), powersgd_rank));
  } else if (compression != Compression::kNone) {
    parts.emplace_back(to_string(compression));
  }
  if (!nccl_rules.empty()) parts.push_back(fmt::format("{} NCCL rule(s)", nccl_rules.size()));
  if (nccl_sockets) parts.push_back(fmt::format("NCCL sockets {}", to_string(nccl_sockets)));
  return join(parts);
}

bool CommConfig::operator==(const CommConfig& o) const {
  return bucket_cap_mb == o.bucket_cap_mb && first_bucket_mb == o.first_bucket_mb &&
         gradient_as_bucket_view == o.gradient_as_bucket_view && algorithm == o.algorithm &&
         streams == o.streams && compression == o.compression && powersgd_rank == o.powersgd_rank &&
         powersgd_start_step == o.powersgd_start_step && nccl_rules == o.nccl_rules && nccl_sockets == o.nccl_sockets;
}

void to_json(json& j, const NcclRule& rule) {
  j = {{"collective", rule.collective}, {"min_bytes", rule.min_bytes}, {"max_bytes", rule.max_bytes},
       {"algorithm", rule.algorithm},   {"protocol", rule.protocol},   {"channels", rule.channels}};
  // Written only when set: a rule without it reads as it always did (same text, same stored row).
  if (rule.chunk_bytes) j["chunk_bytes"] = *rule.chunk_bytes;
}

void to_json(json& j, const CommConfig& config) {
  j = {{"version", kConfigSchemaVersion},
       {"bucket_cap_mb", config.bucket_cap_mb ? json(*config.bucket_cap_mb) : json(nullptr)},
       {"first_bucket_mb", config.first_bucket_mb ? json(*config.first_bucket_mb) : json(nullptr)},
       {"gradient_as_bucket_view",
        config.gradient_as_bucket_view ? json(*config.gradient_as_bucket_view) : json(nullptr)},
       {"algorithm", to_string(config.algorithm)},
       {"streams", config.streams},
       {"compression", to_string(config.compression)},
       {"powersgd_rank", config.powersgd_rank},
       {"powersgd_start_step", config.powersgd_start_step},
       {"nccl_rules", config.nccl_rules}};
  // Written only when set: a config without it reads as it always did (same text, same stored row).
  if (config.nccl_sockets) {
    j["nccl_sockets"] = {{"threads", config.nccl_sockets->threads}, {"per_thread", config.nccl_sockets->per_thread}};
  }
}

namespace {

// Reads and validates a config object; unknown keys go to `warnings` when given.
CommConfig read_config(const json& j, std::vector<std::string>* warnings) {
  using json_io::optional;
  if (!j.is_object()) ACS_THROW(InvalidArgument, "config must be a JSON object, got {}", j.type_name());
  if (!j.contains("version")) {
    ACS_THROW(InvalidArgument, "config has no 'version' field (accepted: {})", kConfigSchemaVersion);
  }
  const auto version = json_io::required<int64_t>(j, "version");
  if (version < kOldestConfigSchemaVersion || version > kConfigSchemaVersion) {
    ACS_THROW(InvalidArgument, "config version {} is not supported by this build (accepted: {} to {})",
              version, kOldestConfigSchemaVersion, kConfigSchemaVersion);
  }
  // Version 1 -> 2 (migrated on read): version 1 had no PowerSGD fields; they keep their defaults.
  std::vector<std::string> known = {"version",   "bucket_cap_mb", "first_bucket_mb", "gradient_as_bucket_view",
                                    "algorithm", "streams",       "compression",     "nccl_rules",
                                    "nccl_sockets"};
  if (version >= 2) {
    known.insert(known.end(), {"powersgd_rank", "powersgd_start_step"});
  }
  warn_unknown(j, known, "", warnings);
  CommConfig config;
  config.bucket_cap_mb = optional<double>(j, "bucket_cap_mb");
  config.first_bucket_mb = optional<double>(j, "first_bucket_mb");
  config.gradient_as_bucket_view = optional<bool>(j, "gradient_as_bucket_view");
  if (auto name = optional<std::string>(j, "algorithm")) config.algorithm = parse_algorithm(*name);
  if (auto streams = optional<int64_t>(j, "streams")) {
    if (*streams < 1 || *streams > kMaxStreams) {
      ACS_THROW(InvalidArgument, "streams {} is out of range (accepted: 1 to {})", *streams, kMaxStreams);
    }
    config.streams = static_cast<int>(*streams);
  }
  if (auto name = optional<std::string>(j, "compression")) config.compression = parse_compression(*name);
  if (const auto& c = info(config.compression); version < c.since_schema) {
    ACS_THROW(InvalidArgument, "config version {} has no compression '{}' (it came with version {})", version, c.name,
              c.since_schema);
  }
  if (version >= 2) {
    if (auto rank = optional<int64_t>(j, "powersgd_rank")) {
      if (*rank < 1 || *rank > kMaxPowerSgdRank) {
        ACS_THROW(InvalidArgument,
                  "powersgd_rank {} is out of range (accepted: an integer 1 to {}; the hook clamps it per tensor "
                  "to the matrix's smaller side)",
                  *rank, kMaxPowerSgdRank);
      }
      config.powersgd_rank = static_cast<int>(*rank);
    }
    if (auto start = optional<int64_t>(j, "powersgd_start_step")) {
      if (*start < 0 || *start > std::numeric_limits<int>::max()) {
        ACS_THROW(InvalidArgument, "powersgd_start_step {} is out of range (accepted: an integer >= 0)", *start);
      }
      config.powersgd_start_step = static_cast<int>(*start);
    }
  }
  if (j.contains("nccl_rules") && !j.at("nccl_rules").is_null()) {
    const auto& rules = j.at("nccl_rules");
    if (!rules.is_array()) ACS_THROW(InvalidArgument, "config field 'nccl_rules' must be an array");
    for (size_t i = 0; i < rules.size(); ++i) {
      const auto& r = rules[i];
      const auto where = fmt::format("nccl_rules[{}]", i);
      if (!r.is_object()) ACS_THROW(InvalidArgument, "{} must be an object", where);
      warn_unknown(r, {"collective", "min_bytes", "max_bytes", "algorithm", "protocol", "channels", "chunk_bytes"},
                   where + ".", warnings);
      NcclRule rule;
      try {
        json_io::read(r, "collective", rule.collective);
        json_io::read(r, "min_bytes", rule.min_bytes);
        json_io::read(r, "max_bytes", rule.max_bytes);
        json_io::read(r, "algorithm", rule.algorithm);
        json_io::read(r, "protocol", rule.protocol);
        json_io::read(r, "channels", rule.channels);
        json_io::read(r, "chunk_bytes", rule.chunk_bytes);
      } catch (const InvalidArgument& e) {
        ACS_THROW(InvalidArgument, "{}: {}", where, e.what());
      }
      if (rule.channels < 0 || rule.channels > kMaxNcclChannels) {
        ACS_THROW(InvalidArgument, "{}.channels {} is out of range (accepted: 0 to {})", where, rule.channels,
                  kMaxNcclChannels);
      }
      config.nccl_rules.push_back(rule);
    }
  }
  if (j.contains("nccl_sockets") && !j.at("nccl_sockets").is_null()) {
    const auto& sockets = j.at("nccl_sockets");
    if (!sockets.is_object()) {
      ACS_THROW(InvalidArgument, "config field 'nccl_sockets' must be an object {{\"threads\": T, \"per_thread\": S}} "
                "or null, got {}", sockets.type_name());
    }
    warn_unknown(sockets, {"threads", "per_thread"}, "nccl_sockets.", warnings);
    NcclSockets value;
    try {
      value.threads = json_io::required<int>(sockets, "threads");
      value.per_thread = json_io::required<int>(sockets, "per_thread");
    } catch (const InvalidArgument& e) {
      ACS_THROW(InvalidArgument, "nccl_sockets: {}", e.what());
    }
    config.nccl_sockets = value;
  }
  config.validate();
  return config;
}

}  // namespace

void from_json(const json& j, CommConfig& config) { config = read_config(j, nullptr); }

std::string config_to_json(const CommConfig& config, int indent) { return json(config).dump(indent); }

CommConfig config_from_json(std::string_view text, std::vector<std::string>* warnings) {
  return read_config(json_io::parse(text, "config"), warnings);
}

std::vector<std::string> apply_env_pins(CommConfig& config) {
  std::vector<std::string> pinned;
  if (auto mb = setting_float("ACSPEED_BUCKET_MB")) {
    config.bucket_cap_mb = *mb;
    pinned.emplace_back("bucket_cap_mb");
  }
  if (auto name = setting_string("ACSPEED_ALGORITHM")) {
    config.algorithm = parse_algorithm(*name);
    pinned.emplace_back("algorithm");
  }
  if (auto streams = setting_int("ACSPEED_STREAMS")) {
    config.streams = static_cast<int>(*streams);
    pinned.emplace_back("streams");
  }
  if (auto name = setting_string("ACSPEED_COMPRESSION")) {
    config.compression = parse_compression(*name);
    pinned.emplace_back("compression");
  }
  if (auto rank = setting_int("ACSPEED_POWERSGD_RANK")) {
    config.powersgd_rank = static_cast<int>(*rank);
    pinned.emplace_back("powersgd_rank");
  }
  if (auto sockets = setting_string("ACSPEED_NCCL_SOCKETS")) {
    config.nccl_sockets = parse_nccl_sockets("ACSPEED_NCCL_SOCKETS", *sockets);
    pinned.emplace_back("nccl_sockets");
  }
  config.validate();
  return pinned;
}

}  // namespace acspeed
