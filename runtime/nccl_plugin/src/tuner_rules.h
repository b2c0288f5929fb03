// The pure logic of the NCCL tuner plugin: config rules compiled to NCCL's indices, matching a
// collective against them, and the cost-table edit that makes NCCL prefer a rule's choice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "acspeed/config.h"

namespace acspeed::nccl_tuner {

// "any" in a compiled rule: that dimension is left to NCCL.
inline constexpr int kAny = -1;

// One NcclRule in NCCL's terms.
struct CompiledRule {
  int collective = kAny;             // acs_nccl_func_t value, or kAny
  uint64_t min_bytes = 0;            // matches min_bytes <= bytes < max_bytes
  uint64_t max_bytes = UINT64_MAX;
  int algorithm = kAny;              // cost-table row (ACS_NCCL_ALGO_*), or kAny
  int protocol = kAny;               // cost-table column (ACS_NCCL_PROTO_*), or kAny
  int channels = 0;                  // 0: NCCL's channel count
  uint64_t chunk_bytes = 0;          // 0: NCCL's chunk size (set only through getChunkSize, ABI v6)
  std::string description;           // for logs: "allreduce [0, 65536) -> ring/ll, 4 channels, chunk 131072 B"
};

// NCCL's index for a name of config.h's lists ("any" gives kAny); throws InvalidArgument naming
// the value and the accepted names.
int nccl_collective_index(std::string_view name);
int nccl_algorithm_index(std::string_view name);
int nccl_protocol_index(std::string_view name);
// config.h's name of an acs_nccl_func_t value ("allreduce"), or "another collective".
const char* nccl_collective_name(int collective);

// Compiles validated config rules, keeping their order (the first match wins).
std::vector<CompiledRule> compile_rules(const std::vector<NcclRule>& rules);

// Index of the first rule matching this collective, or -1.
int find_rule(const std::vector<CompiledRule>& rules, int collective, size_t bytes);

// True when `rule` lets NCCL run this cost-table entry (its algorithm and protocol are "any" or these).
bool rule_allows(const CompiledRule& rule, int algorithm, int protocol);

enum class TableEdit {
  kNoPreference,  // the rule leaves algorithm and protocol to NCCL: table untouched
  kPreferred,     // the rule's cheapest allowed entry now costs 0.0 and wins
  kUnavailable,   // NCCL ruled out every entry the rule allows: table untouched
};

// Edits NCCL's cost table, a row-major float[num_algo][num_proto] of estimated times (NCCL runs
// the cheapest entry that is >= 0), so that NCCL picks the cheapest entry `rule` allows.
// Entries at ACS_NCCL_ALGO_PROTO_IGNORE are never touched, nor is anything when no allowed entry
// is available. Ties at 0.0 that NCCL would resolve in another entry's favour are nudged above 0.
TableEdit prefer_in_table(const CompiledRule& rule, float* table, int num_algo, int num_proto);

}  // namespace acspeed::nccl_tuner
