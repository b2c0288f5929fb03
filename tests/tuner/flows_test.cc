// A config's flows (tuner/include/acspeed/tuner/flows.h): the groups that carry its collectives between two nodes at once,
// as acspeed's comm hook builds them on each backend.
#include "acspeed/tuner/flows.h"

#include <gtest/gtest.h>

namespace acspeed::tuner {
namespace {

CommConfig with(Algorithm algorithm, int streams) {
  CommConfig c;
  c.algorithm = algorithm;
  c.streams = streams;
  return c;
}

constexpr FlowSetup kGloo2x1{2, 2, false};
constexpr FlowSetup kGloo2x4{8, 2, false};
constexpr FlowSetup kNccl2x4{8, 2, true};

TEST(Flows, EachStreamIsAFlowOfItsOwn) {
  EXPECT_EQ(flows(CommConfig{}, kGloo2x1), 1);
  EXPECT_EQ(flows(with(Algorithm::kAllreduce, 2), kGloo2x1), 2);
  EXPECT_EQ(flows(with(Algorithm::kAllreduce, 4), kGloo2x4), 4);  // a ring over every rank crosses once
  EXPECT_EQ(flows(with(Algorithm::kAllreduce, 4), kNccl2x4), 4);
}

TEST(Flows, GlooGivesEachCrossingPhaseAGroupNcclOneCommunicatorPerRole) {
  // Reduce-scatter then all-gather: on gloo two groups per lane, which successive buckets overlap.
  EXPECT_EQ(flows(with(Algorithm::kReduceScatter, 1), kGloo2x1), 2);
  EXPECT_EQ(flows(with(Algorithm::kReduceScatter, 2), kGloo2x1), 4);
  EXPECT_EQ(flows(with(Algorithm::kReduceScatter, 2), kNccl2x4), 2);
}

TEST(Flows, HierarchicalCountsItsInterNodeGroups) {
  EXPECT_EQ(flows(with(Algorithm::kHierarchical, 1), kGloo2x1), 1);   // one rank per node
  EXPECT_EQ(flows(with(Algorithm::kHierarchical, 1), kGloo2x4), 4);   // one group per local rank
  EXPECT_EQ(flows(with(Algorithm::kHierarchical, 2), kNccl2x4), 8);
  EXPECT_EQ(flows(with(Algorithm::kHierarchical, 2), FlowSetup{5, 2, false}), 2);  // unequal nodes: leaders
}

TEST(Flows, NcclsSocketsMultiplyEachGroupsFlowsWhereNcclCarriesThem) {
  CommConfig sockets = with(Algorithm::kAllreduce, 1);
  sockets.nccl_sockets = NcclSockets{2, 4};
  EXPECT_EQ(flows(sockets, kNccl2x4), 8);
  sockets.streams = 2;
  EXPECT_EQ(flows(sockets, kNccl2x4), 16);  // each stream's communicator opens its own sockets
  sockets.algorithm = Algorithm::kHierarchical;
  EXPECT_EQ(flows(sockets, kNccl2x4), 64);  // 2 streams x 4 local-rank groups x 8 sockets
  sockets.nccl_sockets = NcclSockets{1, 1};
  EXPECT_EQ(flows(sockets, kNccl2x4), flows(with(Algorithm::kHierarchical, 2), kNccl2x4));  // 1x1: as NCCL's choice
  // gloo never reads NCCL's variables: the same flows with or without them.
  sockets = with(Algorithm::kReduceScatter, 2);
  sockets.nccl_sockets = NcclSockets{4, 4};
  EXPECT_EQ(flows(sockets, kGloo2x1), flows(with(Algorithm::kReduceScatter, 2), kGloo2x1));
}

TEST(Flows, TheHookSharesGroupsPerRoleOnlyForNcclOnCuda) {
  EXPECT_TRUE(groups_per_role("nccl", "cuda"));
  EXPECT_TRUE(groups_per_role("cpu:gloo,cuda:nccl", "cuda"));
  EXPECT_FALSE(groups_per_role("gloo", "cpu"));
  EXPECT_FALSE(groups_per_role("gloo", "cuda"));
  EXPECT_FALSE(groups_per_role("", ""));  // a session that did not record them ran gloo
}

}  // namespace
}  // namespace acspeed::tuner
