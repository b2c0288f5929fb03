// Whether NCCL's net is Socket here, and where NCCL's sockets knob is searched because of it.
#include "acspeed/tuner/nccl_net.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "../support/scoped_env.h"

namespace acspeed::tuner {
namespace {

using testing::ScopedEnv;

class NcclNetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/acspeed-nccl-net-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  SearchSpace asking() const {
    SearchSpace space;
    space.nccl_sockets = parse_nccl_sockets_list("--nccl-sockets", "0,2x4");
    return space;
  }
  std::string dir_;
};

TEST_F(NcclNetTest, SocketWithoutRdmaDevicesOrNetPluginElseWhatNcclUsesInstead) {
  EXPECT_TRUE(nccl_net(dir_).socket);
  EXPECT_EQ(nccl_net(dir_).why, "no " + dir_ + " device, no NCCL_NET_PLUGIN or NCCL_NET");
  EXPECT_TRUE(nccl_net(dir_ + "/absent").socket);  // no such folder: no RDMA stack at all
  std::ofstream(dir_ + "/mlx5_0").put('\n');
  EXPECT_FALSE(nccl_net(dir_).socket);
  EXPECT_EQ(nccl_net(dir_).why, "RDMA device(s) in " + dir_ + ": mlx5_0 (NCCL's IB net)");
  {
    ScopedEnv ib_off("NCCL_IB_DISABLE", "1");
    EXPECT_TRUE(nccl_net(dir_).socket);
  }
  {
    ScopedEnv net("NCCL_NET", "socket");  // NCCL compares names without case
    EXPECT_TRUE(nccl_net(dir_).socket);
  }
  std::filesystem::remove(dir_ + "/mlx5_0");
  {
    ScopedEnv plugin("NCCL_NET_PLUGIN", "aws-ofi");
    EXPECT_FALSE(nccl_net(dir_).socket);
    EXPECT_NE(nccl_net(dir_).why.find("NCCL_NET_PLUGIN=aws-ofi"), std::string::npos);
  }
  {
    ScopedEnv plugin("NCCL_NET_PLUGIN", "none");
    EXPECT_TRUE(nccl_net(dir_).socket);
  }
  ScopedEnv net("NCCL_NET", "IB");
  EXPECT_FALSE(nccl_net(dir_).socket);
}

TEST_F(NcclNetTest, SocketsAreSearchedOnlyBetweenNodesOverSocketAndThePlanSaysWhy) {
  const NcclNet tcp{true, "no /sys/class/infiniband device, no NCCL_NET_PLUGIN or NCCL_NET"};
  SearchSpace space = asking();
  EXPECT_EQ(gate_nccl_sockets(space, 2, false, tcp),
            "NCCL sockets 0,2x4 searched: NCCL's net is Socket (no /sys/class/infiniband device, no NCCL_NET_PLUGIN "
            "or NCCL_NET); each value runs in workers launched with NCCL_SOCKET_NTHREADS/NCCL_NSOCKS_PERTHREAD set, "
            "so a trial whose value differs from the one before relaunches the workers");
  EXPECT_EQ(space.nccl_sockets.size(), 2u);

  space = asking();
  EXPECT_EQ(gate_nccl_sockets(space, 2, false, {false, "RDMA device(s) in /sys/class/infiniband: mlx5_0"}),
            "NCCL sockets 0,2x4 not searched (NCCL's choice kept): NCCL's net here is not Socket: RDMA device(s) in "
            "/sys/class/infiniband: mlx5_0");
  EXPECT_EQ(space.nccl_sockets, (std::vector<std::optional<NcclSockets>>{std::nullopt}));

  space = asking();
  EXPECT_NE(gate_nccl_sockets(space, 1, false, tcp).find("not searched (NCCL's choice kept): one node"),
            std::string::npos);
  EXPECT_EQ(space.size(), 1u);
  space = asking();  // ranks sharing a GPU talk over NCCL's sockets even on one node
  EXPECT_NE(gate_nccl_sockets(space, 1, true, tcp).find("searched: NCCL's net is Socket"), std::string::npos);
  EXPECT_EQ(space.size(), 2u);
  {
    ScopedEnv own("NCCL_NSOCKS_PERTHREAD", "4");  // the job's own setting reaches every worker: a pin
    space = asking();
    EXPECT_NE(gate_nccl_sockets(space, 2, false, tcp).find("NCCL_NSOCKS_PERTHREAD=4 is set in this environment"),
              std::string::npos);
    EXPECT_EQ(space.size(), 1u);
  }
  space = SearchSpace{};  // not asked for: nothing to say
  EXPECT_EQ(gate_nccl_sockets(space, 2, false, tcp), "");
  ScopedEnv pin("ACSPEED_NCCL_SOCKETS", "4x4");  // a pin runs as asked, whatever the net
  space = asking();
  apply_pins(space);
  EXPECT_EQ(gate_nccl_sockets(space, 2, false, {false, "NCCL_NET=IB"}), "");
  EXPECT_EQ(to_string(space.nccl_sockets.front()), "4x4");
}

}  // namespace
}  // namespace acspeed::tuner
