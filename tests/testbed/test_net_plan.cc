#include <gtest/gtest.h>

#include <linux/filter.h>

#include <cstdint>
#include <sstream>

#include "acspeed/error.h"
#include "acspeed/testbed/net_plan.h"

namespace acspeed::testbed {
namespace {

bool has_line(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// A classic-BPF interpreter for the instructions the flow classifier uses, so the test runs the
// very bytecode tc would load against hand-built frames.
uint32_t run_classic_bpf(const std::string& bytecode, const std::vector<uint8_t>& frame) {
  std::istringstream in(bytecode);
  std::string count_text;
  std::getline(in, count_text, ',');
  std::vector<sock_filter> prog;
  std::string insn;
  while (std::getline(in, insn, ',')) {
    std::istringstream fields(insn);
    unsigned code, jt, jf;
    uint32_t k;
    fields >> code >> jt >> jf >> k;
    prog.push_back({static_cast<uint16_t>(code), static_cast<uint8_t>(jt), static_cast<uint8_t>(jf), k});
  }
  EXPECT_EQ(std::stoul(count_text), prog.size());
  uint32_t a = 0, x = 0, mem[16] = {};
  auto load = [&](size_t at, int size) -> uint32_t {
    EXPECT_LE(at + static_cast<size_t>(size), frame.size()) << "read past the frame";
    uint32_t v = 0;
    for (int i = 0; i < size; ++i) v = (v << 8) | frame.at(at + static_cast<size_t>(i));
    return v;
  };
  for (size_t pc = 0; pc < prog.size(); ++pc) {
    const sock_filter& f = prog[pc];
    switch (f.code) {
      case BPF_LD | BPF_H | BPF_ABS: a = load(f.k, 2); break;
      case BPF_LD | BPF_B | BPF_ABS: a = load(f.k, 1); break;
      case BPF_LD | BPF_H | BPF_IND: a = load(x + f.k, 2); break;
      case BPF_LDX | BPF_B | BPF_MSH: x = 4 * (load(f.k, 1) & 0xf); break;
      case BPF_LDX | BPF_W | BPF_MEM: x = mem[f.k]; break;
      case BPF_ST: mem[f.k] = a; break;
      case BPF_ALU | BPF_ADD | BPF_X: a += x; break;
      case BPF_ALU | BPF_ADD | BPF_K: a += f.k; break;
      case BPF_ALU | BPF_AND | BPF_K: a &= f.k; break;
      case BPF_JMP | BPF_JEQ | BPF_K: pc += (a == f.k) ? f.jt : f.jf; break;
      case BPF_JMP | BPF_JSET | BPF_K: pc += (a & f.k) ? f.jt : f.jf; break;
      case BPF_RET | BPF_A: return a;
      case BPF_RET | BPF_K: return f.k;
      default: ADD_FAILURE() << "unexpected opcode " << f.code; return 0xdead;
    }
  }
  ADD_FAILURE() << "program fell off its end";
  return 0xdead;
}

std::vector<uint8_t> ipv4_frame(uint8_t protocol, uint16_t sport, uint16_t dport, int ihl_words = 5,
                                uint16_t frag = 0x4000 /* DF */) {
  std::vector<uint8_t> f(14 + static_cast<size_t>(ihl_words) * 4 + 20, 0);
  f[12] = 0x08; f[13] = 0x00;
  f[14] = static_cast<uint8_t>(0x40 | ihl_words);
  f[20] = static_cast<uint8_t>(frag >> 8); f[21] = static_cast<uint8_t>(frag);
  f[23] = protocol;
  const size_t l4 = 14 + static_cast<size_t>(ihl_words) * 4;
  f[l4] = static_cast<uint8_t>(sport >> 8); f[l4 + 1] = static_cast<uint8_t>(sport);
  f[l4 + 2] = static_cast<uint8_t>(dport >> 8); f[l4 + 3] = static_cast<uint8_t>(dport);
  return f;
}

TEST(TestbedFlowClassifier, TcpConnectionsMapToOneLeafPerPortSumInBothDirections) {
  const std::string code = flow_classifier_bytecode(1, 0x100, 256);
  const uint32_t forward = run_classic_bpf(code, ipv4_frame(6, 29500, 41234));
  EXPECT_EQ(forward, (1u << 16) | (0x100 + ((29500 + 41234) & 0xff)));
  EXPECT_EQ(run_classic_bpf(code, ipv4_frame(6, 41234, 29500)), forward);
  // Consecutive ephemeral ports to one listener land in different leaves.
  EXPECT_NE(run_classic_bpf(code, ipv4_frame(6, 41235, 29500)), forward);
  // IP options shift the TCP header; the ports are still found.
  EXPECT_EQ(run_classic_bpf(code, ipv4_frame(6, 29500, 41234, 7)), forward);
}

TEST(TestbedFlowClassifier, EverythingElseFallsToTheDefaultLeaf) {
  const std::string code = flow_classifier_bytecode(1, 0x100, 256);
  EXPECT_EQ(run_classic_bpf(code, ipv4_frame(17, 5353, 5353)), 0u);  // UDP
  std::vector<uint8_t> arp(42, 0);
  arp[12] = 0x08; arp[13] = 0x06;
  EXPECT_EQ(run_classic_bpf(code, arp), 0u);
  EXPECT_EQ(run_classic_bpf(code, ipv4_frame(6, 1, 2, 5, 0x2005)), 0u);  // a later fragment
}

TEST(TestbedFlowClassifier, RejectsBucketCountsThatAreNotPowersOfTwo) {
  EXPECT_THROW(flow_classifier_bytecode(1, 0x100, 100), Error);
  EXPECT_THROW(flow_classifier_bytecode(1, 0xff00, 512), Error);
  EXPECT_NO_THROW(flow_classifier_bytecode(1, 0x100, 64));
}

TEST(TestbedNetPlan, EveryCommandRunsInsideOneOfTheClustersNamespaces) {
  const ClusterLayout layout = make_layout("plan", 2);
  const auto commands = bring_up_commands(layout, parse_profile("2x1@1gbit/200mbit"));
  const auto owned = layout.all_netns();
  for (const auto& c : commands) {
    ASSERT_GE(c.argv.size(), 4u);
    const bool netns_add = c.argv[0] == "ip" && c.argv[1] == "netns" && c.argv[2] == "add";
    const bool in_ns = c.argv[1] == "-n";
    EXPECT_TRUE(netns_add || in_ns) << c.argv[0] << " " << c.argv[1] << " " << c.argv[2];
    const std::string& ns = netns_add ? c.argv[3] : c.argv[2];
    EXPECT_NE(std::find(owned.begin(), owned.end(), ns), owned.end()) << ns;
  }
}

TEST(TestbedNetPlan, BuildsABridgeWithOneVethPerNodeAndAddressesEachNode) {
  const ClusterLayout layout = make_layout("plan", 2);
  const auto commands = bring_up_commands(layout, parse_profile("2x1"));
  auto has = [&](std::vector<std::string> argv) {
    for (const auto& c : commands) {
      if (c.argv == argv) return true;
    }
    return false;
  };
  EXPECT_TRUE(has({"ip", "netns", "add", "acst-plan-hub"}));
  EXPECT_TRUE(has({"ip", "-n", "acst-plan-hub", "link", "add", "br0", "type", "bridge"}));
  EXPECT_TRUE(has({"ip", "-n", "acst-plan-hub", "link", "add", "p1", "type", "veth", "peer", "name",
                   "eth0", "netns", "acst-plan-n1"}));
  EXPECT_TRUE(has({"ip", "-n", "acst-plan-hub", "link", "set", "p1", "master", "br0"}));
  EXPECT_TRUE(has({"ip", "-n", "acst-plan-n1", "addr", "add", "10.254.213.2/24", "dev", "eth0"}));
  EXPECT_TRUE(has({"ip", "-n", "acst-plan-n0", "link", "set", "eth0", "up"}));
  for (const auto& c : commands) EXPECT_NE(c.argv[0], "tc") << "an uncapped profile is not shaped";
  // Namespaces exist before anything is put into them.
  EXPECT_EQ(commands[0].argv[1], "netns");
  EXPECT_EQ(commands[2].argv[1], "netns");
}

TEST(TestbedNetPlan, CapsEveryNodeInBothDirections) {
  const ClusterLayout layout = make_layout("cap", 2);
  const auto commands = bring_up_commands(layout, parse_profile("2x1@500mbit"));
  std::vector<std::pair<std::string, std::string>> shaped;  // (netns, dev)
  for (const auto& c : commands) {
    if (c.argv[0] != "tc") continue;
    EXPECT_EQ(c.argv, (std::vector<std::string>{"tc", "-n", c.argv[2], "-batch", "-"}));
    const auto dev_at = c.input.find("dev ") + 4;
    shaped.emplace_back(c.argv[2], c.input.substr(dev_at, c.input.find(' ', dev_at) - dev_at));
    EXPECT_TRUE(has_line(c.input, "root handle 1: htb default 2\n")) << c.input;
    EXPECT_TRUE(has_line(c.input, "classid 1:1 htb rate 500000000bit ceil 500000000bit")) << c.input;
    EXPECT_FALSE(has_line(c.input, "bpf")) << "no flow filter without FLOWRATE";
  }
  EXPECT_EQ(shaped, (std::vector<std::pair<std::string, std::string>>{
                        {"acst-cap-n0", "eth0"}, {"acst-cap-hub", "p0"},
                        {"acst-cap-n1", "eth0"}, {"acst-cap-hub", "p1"}}));
}

TEST(TestbedNetPlan, FlowCapAddsOneLeafPerBucketAndTheClassifierOnTheUplinkOnly) {
  const ToolCommand up = shaping_command("ns", "eth0", {1'000'000'000, 200'000'000});
  EXPECT_EQ(count_of(up.input, "htb rate 200000000bit ceil 200000000bit"), kFlowBuckets);
  EXPECT_TRUE(has_line(up.input, "classid 1:100 htb"));
  EXPECT_TRUE(has_line(up.input, "classid 1:1ff htb"));
  EXPECT_TRUE(has_line(up.input, "filter add dev eth0 parent 1: prio 1 bpf bytecode \"" +
                                     flow_classifier_bytecode(1, kFlowFirstMinor, kFlowBuckets) + "\"\n"));
  const auto commands = bring_up_commands(make_layout("f", 2), parse_profile("2x1@1gbit/200mbit"));
  int filters = 0;
  for (const auto& c : commands) filters += count_of(c.input, "bpf bytecode");
  EXPECT_EQ(filters, 2) << "one classifier per node uplink, none on the hub ports";
}

TEST(TestbedNetPlan, BurstIsOneMillisecondOfTrafficWithAFloor) {
  EXPECT_EQ(burst_bytes(1'000'000'000), 125'000);
  EXPECT_EQ(burst_bytes(10'000'000), 32 * 1024);
}

}  // namespace
}  // namespace acspeed::testbed
