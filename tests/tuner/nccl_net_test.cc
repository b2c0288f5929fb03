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

// Lines as NCCL v2.28.9-1 / v2.30.7-1 print them (src/init.cc "Using network %s" through
// src/debug.cc's "HOST:PID:TID [DEV] NCCL INFO " prefix, a timestamp first where asked for).
TEST(NcclNetLine, TheNetNcclChoseIsReadFromItsInfoLine) {
  EXPECT_EQ(nccl_net_in_log("gpu-node-1:4012:4012 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.5<0>\n"
                            "gpu-node-1:4012:4012 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so.\n"
                            "gpu-node-1:4012:4012 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>\n"
                            "gpu-node-1:4012:4012 [0] NCCL INFO Using network Socket\n"
                            "gpu-node-1:4012:4012 [0] NCCL INFO ncclCommInitRankConfig comm 0x5581 rank 0 nranks 2\n"),
            "Socket");
  EXPECT_EQ(nccl_net_in_log("[2026-12-06 08:01:02] h100-7:88:91 [3] NCCL INFO Using network IB\r\n"), "IB");
  // A net plugin's own name, spaces included (aws-ofi-nccl).
  EXPECT_EQ(nccl_net_in_log("p5-worker-0:21:21 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)\n"
                            "p5-worker-0:21:21 [0] NCCL INFO Using network AWS Libfabric\n"),
            "AWS Libfabric");
  EXPECT_EQ(nccl_net_in_log("node:1:1 [0] NCCL INFO Using network IBext_v8"), "IBext_v8");  // no final newline
  // Absent: no communicator yet, another level, other words.
  EXPECT_EQ(nccl_net_in_log(""), std::nullopt);
  EXPECT_EQ(nccl_net_in_log("node:1:1 [0] NCCL INFO cudaDriverVersion 13000\nNCCL version 2.28.9+cuda13.0\n"),
            std::nullopt);
  EXPECT_EQ(nccl_net_in_log("\nnode:1:1 [0] init.cc:99 NCCL WARN Using network Socket failed\n"), std::nullopt);
  EXPECT_EQ(nccl_net_in_log("node:1:1 [0] NCCL INFO Using network \n"), std::nullopt);
}

TEST_F(NcclNetTest, TheLogsOfEveryRankSayTheNetAndTheLineWinsOverThePlansView) {
  EXPECT_EQ(nccl_net_from_logs(dir_, "nccl-net."), std::nullopt);  // no log yet
  std::ofstream(dir_ + "/nccl-net.host.11.log") << "host:11:11 [0] NCCL INFO Using network Socket\n";
  std::ofstream(dir_ + "/nccl-net.host.12.log") << "host:12:12 [0] NCCL INFO Bootstrap: Using lo\n";  // not yet
  std::ofstream(dir_ + "/workers-1-rank0.log") << "host:13:13 [0] NCCL INFO Using network IB\n";  // not NCCL's file
  auto seen = nccl_net_from_logs(dir_, "nccl-net.");
  ASSERT_TRUE(seen);
  EXPECT_TRUE(seen->socket);
  EXPECT_EQ(seen->why, "NCCL's INFO line: Using network Socket");
  std::ofstream(dir_ + "/nccl-net.host.12.log") << "host:12:12 [0] NCCL INFO Using network IB\n";
  seen = nccl_net_from_logs(dir_, "nccl-net.");
  EXPECT_FALSE(seen->socket);  // ranks that disagree: not Socket for all
  EXPECT_EQ(seen->why, "NCCL's INFO line: Using network IB / Socket");

  const NcclNet plan_tcp{true, "no /sys/class/infiniband device, no NCCL_NET_PLUGIN or NCCL_NET"};
  const NcclNet plan_rdma{false, "RDMA device(s) in /sys/class/infiniband: mlx5_0 (NCCL's IB net)"};
  const NcclNet line_socket{true, "NCCL's INFO line: Using network Socket"};
  const NcclNet line_ib{false, "NCCL's INFO line: Using network IB"};
  EXPECT_EQ(nccl_net_note(plan_tcp, line_socket),
            "NCCL's net: NCCL's INFO line: Using network Socket, as the plan saw it (no /sys/class/infiniband "
            "device, no NCCL_NET_PLUGIN or NCCL_NET)");
  EXPECT_EQ(nccl_net_note(plan_tcp, line_ib),
            "NCCL's net: NCCL's INFO line: Using network IB, not Socket as the plan saw it (no /sys/class/infiniband "
            "device, no NCCL_NET_PLUGIN or NCCL_NET): the line wins (it is what NCCL did); NCCL's sockets change "
            "nothing on that net, so no decision keeps a sockets value");
  EXPECT_EQ(nccl_net_note(plan_rdma, line_socket),
            "NCCL's net: NCCL's INFO line: Using network Socket, although the plan saw another (RDMA device(s) in "
            "/sys/class/infiniband: mlx5_0 (NCCL's IB net)): the line wins (it is what NCCL did), but NCCL's sockets "
            "were not searched; to search them, run with NCCL_NET=Socket (NCCL's choice here anyway) and "
            "--nccl-sockets");
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
