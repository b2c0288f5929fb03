#include "tuner.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "acspeed/config.h"
#include "acspeed/error.h"
#include "acspeed/log.h"
#include "acspeed/nccl_tuner_plugin.h"
#include "acspeed/settings.h"
#include "tuner_rules.h"

namespace acspeed::nccl_tuner {
namespace {

constexpr unsigned long kSubsystems = ACS_NCCL_SUBSYS_INIT | ACS_NCCL_SUBSYS_TUNING;

// The rules in force, shared by every communicator; replaced whole, never edited.
struct RuleSet {
  std::vector<CompiledRule> rules;
  std::string source;  // where they came from, for logs
  // Per rule: whether its first use / its having no entry to prefer / its first chunk size was
  // logged (once each).
  std::unique_ptr<std::atomic<bool>[]> use_logged;
  std::unique_ptr<std::atomic<bool>[]> unavailable_logged;
  std::unique_ptr<std::atomic<bool>[]> chunk_logged;
  // Whether a chunk rule ignored under an ABI without getChunkSize was logged (once per rule set).
  mutable std::atomic<bool> chunk_ignored_logged{false};

  RuleSet(std::vector<CompiledRule> compiled, std::string from)
      : rules(std::move(compiled)),
        source(std::move(from)),
        use_logged(new std::atomic<bool>[rules.size()]()),
        unavailable_logged(new std::atomic<bool>[rules.size()]()),
        chunk_logged(new std::atomic<bool>[rules.size()]()) {}
};

// The first tuner ABI whose NCCL asks the tuner for chunk sizes (getChunkSize, NCCL 2.30).
constexpr int kFirstChunkAbi = 6;

// One per NCCL communicator.
struct Context {
  int abi_version;  // the ABI NCCL loaded the plugin through
  uint64_t comm_id;
  size_t n_ranks;
  size_t n_nodes;
};

// Process-wide state of the plugin.
struct State {
  std::mutex mu;
  std::shared_ptr<const RuleSet> rules;  // null until the first init or set_rules
  std::atomic<acs_nccl_logger_t> logger{nullptr};
};

// Never destroyed: NCCL may still call in while the process runs its exit-time destructors.
State& state() {
  static State* const instance = new State;
  return *instance;
}

// Writes one line through NCCL's logger, which checks its level before formatting. Before any
// communicator has handed us NCCL's logger (set_rules called first), acspeed's own log is used.
template <typename... Args>
void log_line(acs_nccl_log_level_t level, int line, const char* format, Args... args) noexcept {
  const acs_nccl_logger_t logger = state().logger.load();
  if (logger != nullptr) {
    logger(level, kSubsystems, __FILE__, line, format, args...);
    return;
  }
  const LogLevel ours = level == acs_nccl_log_warn ? LogLevel::kWarn : LogLevel::kInfo;
  if (ours < log_level()) return;
  char text[2048];
  std::snprintf(text, sizeof text, format, args...);
  try {
    log_write(ours, text);
  } catch (...) {
    // stderr is gone: nothing left to tell.
  }
}
// Never called: lets the compiler check each TUNER_LOG format against its arguments.
[[gnu::format(printf, 1, 2)]] inline void check_format(const char*, ...) {}
#define TUNER_LOG(level, ...)                                                  \
  do {                                                                          \
    if (false) check_format(__VA_ARGS__);                                       \
    log_line(acs_nccl_log_##level, __LINE__, "TUNER/acspeed: " __VA_ARGS__);    \
  } while (0)

// Logs an internal problem the first time `flag` sees one.
void log_internal_once(std::atomic<bool>& flag, const char* where, const char* what) noexcept {
  if (!flag.exchange(true)) {
    TUNER_LOG(warn, "internal error in %s: %s; NCCL's own choices are kept", where, what);
  }
}

std::string describe_rules(const std::vector<CompiledRule>& rules) {
  std::string text;
  for (size_t i = 0; i < rules.size(); ++i) {
    text += fmt::format("{}[{}] {}", i == 0 ? "" : "; ", i, rules[i].description);
  }
  return text;
}

// Parses a config (runtime/CONFIG.md, any schema version config_from_json reads) into a rule set; throws InvalidArgument (bad config) or Error.
std::shared_ptr<const RuleSet> parse_rules(std::string_view json, std::string source) {
  std::vector<std::string> warnings;
  const CommConfig config = config_from_json(json, &warnings);
  for (const auto& warning : warnings) TUNER_LOG(warn, "%s: %s", source.c_str(), warning.c_str());
  auto rules = std::make_shared<const RuleSet>(compile_rules(config.nccl_rules), std::move(source));
  TUNER_LOG(info, "%zu rule(s) from %s%s%s", rules->rules.size(), rules->source.c_str(),
            rules->rules.empty() ? "" : ": ", describe_rules(rules->rules).c_str());
  return rules;
}

std::string read_file(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) ACS_THROW(Error, "cannot open it: {}", std::strerror(errno));
  std::string text;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, file.get())) > 0) text.append(buffer, n);
  if (std::ferror(file.get())) ACS_THROW(Error, "cannot read it: {}", std::strerror(errno));
  return text;
}

// The rules named by ACSPEED_NCCL_RULES; on any problem one warning and no rules.
std::shared_ptr<const RuleSet> load_from_environment() {
  const auto path = setting_string("ACSPEED_NCCL_RULES");
  auto no_rules = [](std::string why) {
    return std::make_shared<const RuleSet>(std::vector<CompiledRule>{}, std::move(why));
  };
  if (!path) {
    TUNER_LOG(info, "ACSPEED_NCCL_RULES is not set: no rules, NCCL's own choices are kept");
    return no_rules("nowhere (ACSPEED_NCCL_RULES unset)");
  }
  if (path->front() != '/') {
    TUNER_LOG(warn, "ACSPEED_NCCL_RULES='%s' is not an absolute path (accepted: an absolute path "
              "to a config JSON file); no rules, NCCL's own choices are kept", path->c_str());
    return no_rules("nowhere (ACSPEED_NCCL_RULES relative)");
  }
  const std::string source = "rules file '" + *path + "'";
  try {
    return parse_rules(read_file(*path), source);
  } catch (const Error& e) {
    TUNER_LOG(warn, "%s rejected: %s; no rules, NCCL's own choices are kept", source.c_str(), e.what());
  }
  return no_rules("nowhere (" + source + " rejected)");
}

std::shared_ptr<const RuleSet> current_rules(bool load_if_needed) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.rules && load_if_needed) s.rules = load_from_environment();
  return s.rules;
}

std::atomic<bool> g_init_failed{false};
std::atomic<bool> g_info_failed{false};
std::atomic<bool> g_bad_table{false};
std::atomic<bool> g_chunk_failed{false};
std::atomic<bool> g_finalize_failed{false};

}  // namespace

acs_nccl_result_t init(int abi_version, acs_nccl_logger_t logger, uint64_t comm_id, size_t n_ranks,
                       size_t n_nodes, void** context) noexcept {
  try {
    if (context != nullptr) *context = nullptr;
    if (logger != nullptr) state().logger.store(logger);
    const auto rules = current_rules(/*load_if_needed=*/true);
    if (context != nullptr) *context = new Context{abi_version, comm_id, n_ranks, n_nodes};
    TUNER_LOG(info, "communicator %lx (%zu ranks, %zu nodes, tuner ABI v%d): %zu rule(s) from %s",
              static_cast<unsigned long>(comm_id), n_ranks, n_nodes, abi_version, rules->rules.size(),
              rules->source.c_str());
  } catch (const std::exception& e) {
    log_internal_once(g_init_failed, "init", e.what());
  } catch (...) {
    log_internal_once(g_init_failed, "init", "unknown exception");
  }
  return acs_nccl_success;
}

acs_nccl_result_t get_coll_info(void* context, int collective, size_t n_bytes, float** cost_table,
                                int num_algo, int num_proto, int* n_channels) noexcept {
  try {
    if (n_channels == nullptr || cost_table == nullptr || num_algo <= 0 || num_proto <= 0) {
      if (n_channels != nullptr) *n_channels = 0;
      if (!g_bad_table.exchange(true)) {
        TUNER_LOG(warn, "getCollInfo without a usable cost table (%d x %d, table %s, nChannels %s); "
                  "NCCL's own choices are kept", num_algo, num_proto, cost_table ? "set" : "null",
                  n_channels ? "set" : "null");
      }
      return acs_nccl_success;
    }
    *n_channels = 0;
    const auto rules = current_rules(/*load_if_needed=*/false);
    if (!rules) return acs_nccl_success;
    const int index = find_rule(rules->rules, collective, n_bytes);
    if (index < 0) return acs_nccl_success;
    const CompiledRule& rule = rules->rules[index];
    // NCCL passes its float[numAlgo][numProto] array cast to float**.
    float* table = reinterpret_cast<float*>(cost_table);
    const TableEdit edit = prefer_in_table(rule, table, num_algo, num_proto);
    *n_channels = rule.channels;
    const auto* ctx = static_cast<const Context*>(context);
    const unsigned long comm = ctx ? static_cast<unsigned long>(ctx->comm_id) : 0UL;
    if (rule.chunk_bytes != 0 && ctx != nullptr && ctx->abi_version < kFirstChunkAbi &&
        !rules->chunk_ignored_logged.exchange(true)) {
      TUNER_LOG(warn, "rule %d (%s): this NCCL loaded tuner ABI v%d, which has no getChunkSize (NCCL >= 2.30 "
                "asks for v6): the chunk size is ignored and NCCL's is kept, the rest of the rule applies",
                index, rule.description.c_str(), ctx->abi_version);
    }
    if (edit == TableEdit::kUnavailable) {
      if (!rules->unavailable_logged[index].exchange(true)) {
        TUNER_LOG(info, "rule %d (%s): NCCL offers none of its algorithm/protocol for %s of %zu "
                  "bytes on communicator %lx; NCCL's algorithm kept", index, rule.description.c_str(),
                  nccl_collective_name(collective), n_bytes, comm);
      }
    } else if (!rules->use_logged[index].exchange(true)) {
      TUNER_LOG(info, "rule %d (%s) first applied to %s of %zu bytes on communicator %lx", index,
                rule.description.c_str(), nccl_collective_name(collective), n_bytes, comm);
    }
  } catch (const std::exception& e) {
    log_internal_once(g_info_failed, "getCollInfo", e.what());
  } catch (...) {
    log_internal_once(g_info_failed, "getCollInfo", "unknown exception");
  }
  return acs_nccl_success;
}

acs_nccl_result_t get_chunk_size(void* context, int collective, size_t n_bytes, int algorithm, int protocol,
                                 int n_channels, size_t* chunk_size) noexcept {
  try {
    if (chunk_size == nullptr) return acs_nccl_success;
    const auto rules = current_rules(/*load_if_needed=*/false);
    if (!rules) return acs_nccl_success;
    const int index = find_rule(rules->rules, collective, n_bytes);
    if (index < 0) return acs_nccl_success;
    const CompiledRule& rule = rules->rules[index];
    // A chunk size belongs to the rule's algorithm and protocol: where NCCL runs another, its own stays.
    if (rule.chunk_bytes == 0 || !rule_allows(rule, algorithm, protocol)) return acs_nccl_success;
    const size_t from = *chunk_size;
    *chunk_size = static_cast<size_t>(rule.chunk_bytes);
    if (!rules->chunk_logged[index].exchange(true)) {
      const auto* ctx = static_cast<const Context*>(context);
      TUNER_LOG(info, "rule %d (%s) first set the chunk size of %s of %zu bytes (algorithm %d, protocol %d, "
                "%d channels) on communicator %lx: %zu -> %zu bytes (NCCL clamps it to its buffer)",
                index, rule.description.c_str(), nccl_collective_name(collective), n_bytes, algorithm, protocol,
                n_channels, ctx ? static_cast<unsigned long>(ctx->comm_id) : 0UL, from, *chunk_size);
    }
  } catch (const std::exception& e) {
    log_internal_once(g_chunk_failed, "getChunkSize", e.what());
  } catch (...) {
    log_internal_once(g_chunk_failed, "getChunkSize", "unknown exception");
  }
  return acs_nccl_success;
}

acs_nccl_result_t finalize(void* context) noexcept {
  try {
    delete static_cast<Context*>(context);
  } catch (...) {
    log_internal_once(g_finalize_failed, "finalize", "unknown exception");
  }
  return acs_nccl_success;
}

int set_rules(const char* config_json) noexcept {
  try {
    if (config_json == nullptr) {
      TUNER_LOG(warn, "acspeed_nccl_tuner_set_rules(NULL) refused (accepted: a config JSON text); "
                "the rules in force are kept");
      return ACSPEED_NCCL_TUNER_INVALID_CONFIG;
    }
    std::shared_ptr<const RuleSet> rules;
    try {
      rules = parse_rules(config_json, "acspeed_nccl_tuner_set_rules");
    } catch (const InvalidArgument& e) {
      TUNER_LOG(warn, "acspeed_nccl_tuner_set_rules refused the config: %s; the rules in force are kept",
                e.what());
      return ACSPEED_NCCL_TUNER_INVALID_CONFIG;
    }
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    s.rules = std::move(rules);
    return ACSPEED_NCCL_TUNER_OK;
  } catch (const std::exception& e) {
    TUNER_LOG(warn, "acspeed_nccl_tuner_set_rules failed: %s; the rules in force are kept", e.what());
  } catch (...) {
    TUNER_LOG(warn, "acspeed_nccl_tuner_set_rules failed; the rules in force are kept");
  }
  return ACSPEED_NCCL_TUNER_INTERNAL_ERROR;
}

}  // namespace acspeed::nccl_tuner
