// The plugin's rule logic without the library: NCCL indices, matching, cost-table edits.
#include "tuner_rules.h"

#include <gtest/gtest.h>

#include "acspeed/config.h"
#include "acspeed/error.h"
#include "fake_nccl.h"

namespace acspeed::nccl_tuner {
namespace {

using testing::CostTable;
using testing::nccl_pick;
using testing::typical_allreduce_table;

CompiledRule rule_for(std::string algorithm, std::string protocol, int channels = 0) {
  NcclRule rule;
  rule.algorithm = std::move(algorithm);
  rule.protocol = std::move(protocol);
  rule.channels = channels;
  return compile_rules({rule}).at(0);
}

TEST(NcclTunerRules, ConfigNamesMapToNccl228Indices) {
  // NCCL 2.28: ncclFuncBroadcast=0, Reduce=1, AllGather=2, ReduceScatter=3, AllReduce=4;
  // NCCL_ALGO_TREE=0 ... PAT=6; NCCL_PROTO_LL=0, LL128=1, SIMPLE=2.
  EXPECT_EQ(nccl_collective_index("broadcast"), 0);
  EXPECT_EQ(nccl_collective_index("reduce"), 1);
  EXPECT_EQ(nccl_collective_index("allgather"), 2);
  EXPECT_EQ(nccl_collective_index("reducescatter"), 3);
  EXPECT_EQ(nccl_collective_index("allreduce"), 4);
  EXPECT_EQ(nccl_collective_index("any"), kAny);
  const std::vector<std::string> algorithms = {"tree", "ring", "collnet_direct", "collnet_chain",
                                               "nvls", "nvls_tree", "pat"};
  for (size_t i = 0; i < algorithms.size(); ++i) EXPECT_EQ(nccl_algorithm_index(algorithms[i]), int(i));
  EXPECT_EQ(nccl_protocol_index("ll"), 0);
  EXPECT_EQ(nccl_protocol_index("ll128"), 1);
  EXPECT_EQ(nccl_protocol_index("simple"), 2);
  // Every name the config schema accepts has an index.
  for (const auto& name : nccl_collective_names()) EXPECT_NO_THROW(nccl_collective_index(name)) << name;
  for (const auto& name : nccl_algorithm_names()) EXPECT_NO_THROW(nccl_algorithm_index(name)) << name;
  for (const auto& name : nccl_protocol_names()) EXPECT_NO_THROW(nccl_protocol_index(name)) << name;
  EXPECT_STREQ(nccl_collective_name(acs_nccl_func_all_gather), "allgather");
  EXPECT_STREQ(nccl_collective_name(acs_nccl_func_send), "another collective");
}

TEST(NcclTunerRules, UnknownNameNamesValueAndAcceptedOnes) {
  try {
    nccl_algorithm_index("butterfly");
    FAIL() << "no exception";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'butterfly'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nvls_tree"), std::string::npos) << e.what();
  }
}

TEST(NcclTunerRules, FirstMatchingRuleWinsOverHalfOpenByteRanges) {
  NcclRule small;
  small.collective = "allreduce";
  small.max_bytes = 65536;
  small.algorithm = "ring";
  NcclRule any_large;
  any_large.collective = "any";
  any_large.min_bytes = 65536;
  any_large.protocol = "simple";
  NcclRule shadowed = small;  // never reached: `small` comes first
  const auto rules = compile_rules({small, any_large, shadowed});
  EXPECT_EQ(find_rule(rules, acs_nccl_func_all_reduce, 0), 0);
  EXPECT_EQ(find_rule(rules, acs_nccl_func_all_reduce, 65535), 0);
  EXPECT_EQ(find_rule(rules, acs_nccl_func_all_reduce, 65536), 1);  // max_bytes is exclusive
  EXPECT_EQ(find_rule(rules, acs_nccl_func_all_gather, 100), -1);   // small is allreduce only
  EXPECT_EQ(find_rule(rules, acs_nccl_func_all_gather, 1 << 20), 1);
  EXPECT_EQ(find_rule(rules, acs_nccl_func_all_to_all, 1 << 20), 1);  // "any" means any
  EXPECT_EQ(find_rule({}, acs_nccl_func_all_reduce, 1), -1);
}

TEST(NcclTunerRules, ChunkBytesIsCompiledAndDescribedOnlyWhenSet) {
  NcclRule chunked;
  chunked.algorithm = "ring";
  chunked.chunk_bytes = 131072;
  const auto rules = compile_rules({chunked, NcclRule{}});
  EXPECT_EQ(rules[0].chunk_bytes, 131072u);
  EXPECT_EQ(rules[0].description, "allreduce [0, 9223372036854775807) -> ring/any, NCCL's channels, chunk 131072 B");
  EXPECT_EQ(rules[1].chunk_bytes, 0u);  // NCCL's chunk size
  EXPECT_EQ(rules[1].description, "allreduce [0, 9223372036854775807) -> any/any, NCCL's channels");
}

TEST(NcclTunerRules, RuleAllowsTheAlgorithmsAndProtocolsItNamesOrAll) {
  const auto ring_any = rule_for("ring", "any");
  EXPECT_TRUE(rule_allows(ring_any, ACS_NCCL_ALGO_RING, ACS_NCCL_PROTO_LL));
  EXPECT_TRUE(rule_allows(ring_any, ACS_NCCL_ALGO_RING, ACS_NCCL_PROTO_SIMPLE));
  EXPECT_FALSE(rule_allows(ring_any, ACS_NCCL_ALGO_TREE, ACS_NCCL_PROTO_SIMPLE));
  const auto any_ll128 = rule_for("any", "ll128");
  EXPECT_TRUE(rule_allows(any_ll128, ACS_NCCL_ALGO_PAT, ACS_NCCL_PROTO_LL128));
  EXPECT_FALSE(rule_allows(any_ll128, ACS_NCCL_ALGO_PAT, ACS_NCCL_PROTO_LL));
  EXPECT_TRUE(rule_allows(rule_for("any", "any"), ACS_NCCL_ALGO_NVLS, ACS_NCCL_PROTO_SIMPLE));
  EXPECT_FALSE(rule_allows(rule_for("tree", "ll"), ACS_NCCL_ALGO_TREE, ACS_NCCL_PROTO_SIMPLE));
}

TEST(NcclTunerRules, AlgorithmAndProtocolMakesThatEntryNcclsPick) {
  CostTable table = typical_allreduce_table();
  ASSERT_EQ(nccl_pick(table), std::make_pair(ACS_NCCL_ALGO_NVLS, ACS_NCCL_PROTO_SIMPLE));
  const CostTable before = table;
  EXPECT_EQ(prefer_in_table(rule_for("ring", "ll128"), &table.cells[0][0], 7, 3), TableEdit::kPreferred);
  EXPECT_EQ(nccl_pick(table), std::make_pair(ACS_NCCL_ALGO_RING, ACS_NCCL_PROTO_LL128));
  EXPECT_EQ(table.cells[ACS_NCCL_ALGO_RING][ACS_NCCL_PROTO_LL128], 0.0f);
  // Nothing else moved, ignored entries included.
  for (int a = 0; a < 7; ++a) {
    for (int p = 0; p < 3; ++p) {
      if (a == ACS_NCCL_ALGO_RING && p == ACS_NCCL_PROTO_LL128) continue;
      EXPECT_EQ(table.cells[a][p], before.cells[a][p]) << a << "/" << p;
    }
  }
}

TEST(NcclTunerRules, AlgorithmOnlyKeepsNcclsBestProtocolWithinIt) {
  CostTable table = typical_allreduce_table();
  EXPECT_EQ(prefer_in_table(rule_for("tree", "any"), &table.cells[0][0], 7, 3), TableEdit::kPreferred);
  EXPECT_EQ(nccl_pick(table), std::make_pair(ACS_NCCL_ALGO_TREE, ACS_NCCL_PROTO_SIMPLE));
  table = typical_allreduce_table();
  EXPECT_EQ(prefer_in_table(rule_for("any", "ll"), &table.cells[0][0], 7, 3), TableEdit::kPreferred);
  EXPECT_EQ(nccl_pick(table), std::make_pair(ACS_NCCL_ALGO_TREE, ACS_NCCL_PROTO_LL));
}

TEST(NcclTunerRules, RuledOutChoiceLeavesTableAlone) {
  for (const auto& [algorithm, protocol] : std::vector<std::pair<std::string, std::string>>{
           {"pat", "simple"}, {"collnet_direct", "any"}, {"nvls", "ll"}}) {
    CostTable table = typical_allreduce_table();
    EXPECT_EQ(prefer_in_table(rule_for(algorithm, protocol), &table.cells[0][0], 7, 3),
              TableEdit::kUnavailable) << algorithm << "/" << protocol;
    EXPECT_EQ(table, typical_allreduce_table()) << algorithm << "/" << protocol;
  }
}

TEST(NcclTunerRules, AnyAnyLeavesTableAlone) {
  CostTable table = typical_allreduce_table();
  EXPECT_EQ(prefer_in_table(rule_for("any", "any", 4), &table.cells[0][0], 7, 3), TableEdit::kNoPreference);
  EXPECT_EQ(table, typical_allreduce_table());
}

TEST(NcclTunerRules, EarlierZeroCostEntryDoesNotStealTheChoice) {
  // NCCL keeps the first of equal minima: a tree entry already at 0.0 would beat ring at 0.0.
  CostTable table = typical_allreduce_table();
  table.cells[ACS_NCCL_ALGO_TREE][ACS_NCCL_PROTO_LL] = 0.0f;
  EXPECT_EQ(prefer_in_table(rule_for("ring", "simple"), &table.cells[0][0], 7, 3), TableEdit::kPreferred);
  EXPECT_EQ(nccl_pick(table), std::make_pair(ACS_NCCL_ALGO_RING, ACS_NCCL_PROTO_SIMPLE));
  EXPECT_GT(table.cells[ACS_NCCL_ALGO_TREE][ACS_NCCL_PROTO_LL], 0.0f);
}

TEST(NcclTunerRules, SmallerTableThanNcclsIsRespected) {
  // A table of 2 algorithms x 2 protocols (numAlgo/numProto come from NCCL): the rule's entry
  // is outside it, so nothing is touched or read out of bounds.
  float table[2][2] = {{4.0f, 3.0f}, {2.0f, 1.0f}};
  EXPECT_EQ(prefer_in_table(rule_for("ring", "simple"), &table[0][0], 2, 2), TableEdit::kUnavailable);
  EXPECT_EQ(prefer_in_table(rule_for("tree", "ll128"), &table[0][0], 2, 2), TableEdit::kPreferred);
  EXPECT_EQ(table[0][1], 0.0f);
  EXPECT_EQ(table[1][1], 1.0f);
}

}  // namespace
}  // namespace acspeed::nccl_tuner
