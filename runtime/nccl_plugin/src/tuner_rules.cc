#include "tuner_rules.h"

#include <limits>
#include <utility>

#include "acspeed/error.h"
#include "nccl_tuner_common.h"

namespace acspeed::nccl_tuner {
namespace {

struct NamedIndex {
  std::string_view name;  // a literal, so name.data() is NUL-terminated
  int index;
};

// config.h's names -> NCCL 2.28's enum values (src/include/nccl_common.h, plugin/nccl_tuner.h).
constexpr NamedIndex kCollectives[] = {
    {"allreduce", acs_nccl_func_all_reduce},   {"allgather", acs_nccl_func_all_gather},
    {"reducescatter", acs_nccl_func_reduce_scatter}, {"broadcast", acs_nccl_func_broadcast},
    {"reduce", acs_nccl_func_reduce},          {"any", kAny},
};
constexpr NamedIndex kAlgorithms[] = {
    {"tree", ACS_NCCL_ALGO_TREE},
    {"ring", ACS_NCCL_ALGO_RING},
    {"collnet_direct", ACS_NCCL_ALGO_COLLNET_DIRECT},
    {"collnet_chain", ACS_NCCL_ALGO_COLLNET_CHAIN},
    {"nvls", ACS_NCCL_ALGO_NVLS},
    {"nvls_tree", ACS_NCCL_ALGO_NVLS_TREE},
    {"pat", ACS_NCCL_ALGO_PAT},
    {"any", kAny},
};
constexpr NamedIndex kProtocols[] = {
    {"ll", ACS_NCCL_PROTO_LL},
    {"ll128", ACS_NCCL_PROTO_LL128},
    {"simple", ACS_NCCL_PROTO_SIMPLE},
    {"any", kAny},
};

template <size_t N>
int lookup(const char* what, const NamedIndex (&table)[N], std::string_view name) {
  std::string accepted;
  for (const auto& entry : table) {
    if (entry.name == name) return entry.index;
    if (!accepted.empty()) accepted += ", ";
    accepted += entry.name;
  }
  ACS_THROW(InvalidArgument, "NCCL {} '{}' is not one of {}", what, name, accepted);
}

bool is_ignored(float cost) { return cost == ACS_NCCL_ALGO_PROTO_IGNORE; }

}  // namespace

int nccl_collective_index(std::string_view name) { return lookup("collective", kCollectives, name); }
const char* nccl_collective_name(int collective) {
  for (const auto& entry : kCollectives) {
    if (entry.index == collective && entry.index != kAny) return entry.name.data();
  }
  return "another collective";
}
int nccl_algorithm_index(std::string_view name) { return lookup("algorithm", kAlgorithms, name); }
int nccl_protocol_index(std::string_view name) { return lookup("protocol", kProtocols, name); }

// The rules come from a validated CommConfig: byte ranges are non-empty and non-negative.
std::vector<CompiledRule> compile_rules(const std::vector<NcclRule>& rules) {
  std::vector<CompiledRule> compiled;
  compiled.reserve(rules.size());
  for (const auto& rule : rules) {
    CompiledRule c;
    c.collective = nccl_collective_index(rule.collective);
    c.min_bytes = static_cast<uint64_t>(rule.min_bytes);
    c.max_bytes = static_cast<uint64_t>(rule.max_bytes);
    c.algorithm = nccl_algorithm_index(rule.algorithm);
    c.protocol = nccl_protocol_index(rule.protocol);
    c.channels = rule.channels;
    c.chunk_bytes = rule.chunk_bytes ? static_cast<uint64_t>(*rule.chunk_bytes) : 0;
    c.description = fmt::format("{} [{}, {}) -> {}/{}, {}{}", rule.collective, rule.min_bytes,
                                rule.max_bytes, rule.algorithm, rule.protocol,
                                rule.channels == 0   ? std::string("NCCL's channels")
                                : rule.channels == 1 ? std::string("1 channel")
                                                     : fmt::format("{} channels", rule.channels),
                                rule.chunk_bytes ? fmt::format(", chunk {} B", *rule.chunk_bytes) : std::string());
    compiled.push_back(std::move(c));
  }
  return compiled;
}

int find_rule(const std::vector<CompiledRule>& rules, int collective, size_t bytes) {
  const auto n = static_cast<uint64_t>(bytes);
  for (size_t i = 0; i < rules.size(); ++i) {
    const auto& rule = rules[i];
    if ((rule.collective == kAny || rule.collective == collective) && rule.min_bytes <= n &&
        n < rule.max_bytes) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

bool rule_allows(const CompiledRule& rule, int algorithm, int protocol) {
  return (rule.algorithm == kAny || rule.algorithm == algorithm) && (rule.protocol == kAny || rule.protocol == protocol);
}

TableEdit prefer_in_table(const CompiledRule& rule, float* table, int num_algo, int num_proto) {
  if (rule.algorithm == kAny && rule.protocol == kAny) return TableEdit::kNoPreference;
  // The cheapest allowed entry NCCL could run, first in NCCL's own scan order on ties.
  int chosen = -1;
  for (int a = 0; a < num_algo; ++a) {
    for (int p = 0; p < num_proto; ++p) {
      const float cost = table[a * num_proto + p];
      if (!rule_allows(rule, a, p) || is_ignored(cost) || !(cost >= 0.0f)) continue;
      if (chosen < 0 || cost < table[chosen]) chosen = a * num_proto + p;
    }
  }
  if (chosen < 0) return TableEdit::kUnavailable;
  table[chosen] = 0.0f;
  // NCCL keeps the first entry of the minimum cost: an earlier entry already at 0.0 would win.
  for (int i = 0; i < chosen; ++i) {
    if (!is_ignored(table[i]) && table[i] == 0.0f) {
      table[i] = std::numeric_limits<float>::min();  // smallest normal: survives flush-to-zero
    }
  }
  return TableEdit::kPreferred;
}

}  // namespace acspeed::nccl_tuner
