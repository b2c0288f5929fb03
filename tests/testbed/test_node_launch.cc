#include <gtest/gtest.h>

#include <map>

#include "acspeed/error.h"
#include "acspeed/testbed/node_launch.h"

namespace acspeed::testbed {
namespace {

std::map<std::string, std::string> as_map(const EnvList& env) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : env) EXPECT_TRUE(out.emplace(key, value).second) << "twice: " << key;
  return out;
}

TEST(TestbedNodeLaunch, EveryNodeSeesItsRankAndNodeZeroAsMaster) {
  const Profile profile = parse_profile("3x2@500mbit");
  const ClusterLayout layout = make_layout("env", 3);
  for (int rank = 0; rank < 3; ++rank) {
    auto env = as_map(node_environment(layout, profile, rank, 29511));
    EXPECT_EQ(env["NODE_RANK"], std::to_string(rank));
    EXPECT_EQ(env["NNODES"], "3");
    EXPECT_EQ(env["NPROC_PER_NODE"], "2");
    EXPECT_EQ(env["NODE_ADDR"], layout.nodes[static_cast<size_t>(rank)].address);
    EXPECT_EQ(env["MASTER_ADDR"], "10.254.213.1");
    EXPECT_EQ(env["MASTER_PORT"], "29511");
    EXPECT_EQ(env["GLOO_SOCKET_IFNAME"], "eth0");
    EXPECT_EQ(env["NCCL_SOCKET_IFNAME"], "eth0");
    EXPECT_EQ(env["ACSPEED_INSTANCE_TYPE"], "testbed-3x2@500mbit");
    EXPECT_EQ(env["ACSPEED_TESTBED"], "env");
  }
  EXPECT_THROW(node_environment(layout, profile, 3, 29500), Error);
}

TEST(TestbedNodeLaunch, TorchrunCommandUsesC10dRendezvousOnNodeZero) {
  const Profile profile = parse_profile("2x2@1gbit");
  const ClusterLayout layout = make_layout("tr", 2);
  const TorchrunOptions options{"/usr/bin/python3", {"train.py", "--model", "resnet18"}};
  EXPECT_EQ(torchrun_command(layout, profile, 1, 29500, options),
            (std::vector<std::string>{"/usr/bin/python3", "-m", "torch.distributed.run", "--nnodes=2",
                                      "--nproc_per_node=2", "--rdzv_backend=c10d",
                                      "--rdzv_endpoint=10.254.213.1:29500", "--rdzv_id=tr",
                                      "--rdzv_conf=is_host=0", "--local_addr=10.254.213.2", "train.py",
                                      "--model", "resnet18"}));
  const auto node0 = torchrun_command(layout, profile, 0, 29500, options);
  EXPECT_NE(std::find(node0.begin(), node0.end(), "--rdzv_conf=is_host=1"), node0.end());
  EXPECT_NE(std::find(node0.begin(), node0.end(), "--local_addr=10.254.213.1"), node0.end());
  EXPECT_THROW(torchrun_command(layout, profile, 0, 29500, {"python3", {}}), InvalidArgument);
  // A log folder goes before the script, so the script's own arguments stay last.
  const auto logged = torchrun_command(layout, profile, 1, 29500, {"python3", {"train.py"}, "/tmp/logs/node1"});
  ASSERT_GE(logged.size(), 2U);
  EXPECT_EQ(logged[logged.size() - 2], "--log-dir=/tmp/logs/node1");
  EXPECT_EQ(logged.back(), "train.py");
}

TEST(TestbedNodeLaunch, PinningGivesEachNodeItsOwnBlockOfCpus) {
  EXPECT_EQ(cpus_for_node({0, 1}, 2, 0), (std::vector<int>{0}));
  EXPECT_EQ(cpus_for_node({0, 1}, 2, 1), (std::vector<int>{1}));
  EXPECT_EQ(cpus_for_node({0, 1, 2, 3, 4, 5, 6, 7}, 2, 1), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(cpus_for_node({2, 3, 5, 7, 11}, 2, 1), (std::vector<int>{5, 7}));  // remainder unused
  EXPECT_EQ(cpus_for_node({0, 1}, 4, 3), (std::vector<int>{1}));               // fewer CPUs: shared
  EXPECT_THROW(cpus_for_node({}, 2, 0), Error);
  EXPECT_THROW(cpus_for_node({0, 1}, 2, 2), Error);
}

}  // namespace
}  // namespace acspeed::testbed
