// Fuzz target: the NCCL tuner plugin's rules (the config JSON the plugin is given, compiled by
// runtime/nccl_plugin/src/tuner_rules.cc), then matched and applied to a cost table.
// Properties: a config that reads compiles without throwing; a rule matches at its min_bytes
// (itself or an earlier rule); the table edit never touches an entry NCCL ruled out, and a
// preferred rule leaves an entry it allows at 0, the first cheapest of the table (what NCCL runs).
#include <algorithm>
#include <cstring>
#include <string>

#include "acspeed/config.h"
#include "acspeed/error.h"
#include "fuzz_check.h"
#include "nccl_tuner_common.h"
#include "tuner_rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace acspeed;
  using namespace acspeed::nccl_tuner;
  CommConfig config;
  try {
    config = config_from_json(fuzz::text_of(data, size));
  } catch (const InvalidArgument&) {
    return 0;
  }
  const std::vector<CompiledRule> rules = compile_rules(config.nccl_rules);
  if (rules.size() != config.nccl_rules.size()) fuzz::broken("one compiled rule per rule", config_to_json(config));
  constexpr int kAlgos = ACS_NCCL_NUM_ALGORITHMS;
  constexpr int kProtos = ACS_NCCL_NUM_PROTOCOLS;
  for (size_t i = 0; i < rules.size(); ++i) {
    const CompiledRule& rule = rules[i];
    if (rule.min_bytes >= rule.max_bytes) continue;
    const int collective = rule.collective == kAny ? 0 : rule.collective;
    const int found = find_rule(rules, collective, static_cast<size_t>(rule.min_bytes));
    if (found < 0 || found > static_cast<int>(i)) {
      fuzz::broken("a rule matches at its min_bytes", rule.description);
    }
    // A table whose entries depend on the input bytes: some ruled out, some already at 0 (ties
    // NCCL resolves in the first entry's favour), the rest positive times.
    float table[kAlgos * kProtos];
    for (int e = 0; e < kAlgos * kProtos; ++e) {
      const uint8_t byte = size > 0 ? data[(e + i) % size] : 0;
      table[e] = byte % 5 == 0 ? ACS_NCCL_ALGO_PROTO_IGNORE : byte % 7 == 1 ? 0.0f : 1.0f + byte;
    }
    float before[kAlgos * kProtos];
    std::memcpy(before, table, sizeof table);
    const TableEdit edit = prefer_in_table(rule, table, kAlgos, kProtos);
    for (int e = 0; e < kAlgos * kProtos; ++e) {
      if (before[e] == ACS_NCCL_ALGO_PROTO_IGNORE && table[e] != ACS_NCCL_ALGO_PROTO_IGNORE) {
        fuzz::broken("a ruled-out entry stays ruled out", rule.description);
      }
    }
    if (edit != TableEdit::kPreferred) {
      if (std::memcmp(before, table, sizeof table) != 0) fuzz::broken("no preference leaves the table as it was", rule.description);
      continue;
    }
    int winner = -1;
    for (int e = 0; e < kAlgos * kProtos; ++e) {
      if (table[e] < 0) continue;
      if (winner < 0 || table[e] < table[winner]) winner = e;
    }
    const int algo = winner / kProtos;
    const int proto = winner % kProtos;
    if (winner < 0 || table[winner] != 0.0f || (rule.algorithm != kAny && algo != rule.algorithm) ||
        (rule.protocol != kAny && proto != rule.protocol)) {
      fuzz::broken("the preferred entry is one the rule allows, at 0, the cheapest", rule.description);
    }
  }
  return 0;
}
