#include "acspeed/testbed/net_plan.h"

#include <linux/filter.h>

#include <algorithm>

#include <fmt/format.h>

#include "acspeed/error.h"

namespace acspeed::testbed {
namespace {

constexpr int kQuantumBytes = 60000;  // > MTU; HTB warns outside 1000..200000

ToolCommand ip(const std::string& netns, std::vector<std::string> args) {
  std::vector<std::string> argv = {"ip", "-n", netns};
  argv.insert(argv.end(), args.begin(), args.end());
  return {std::move(argv), {}};
}

std::string htb_class(const std::string& dev, const std::string& parent, const std::string& classid,
                      int64_t rate_bps, int64_t ceil_bps) {
  return fmt::format(
      "class add dev {} parent {} classid {} htb rate {}bit ceil {}bit burst {} cburst {} quantum {}\n",
      dev, parent, classid, rate_bps, ceil_bps, burst_bytes(rate_bps), burst_bytes(ceil_bps),
      kQuantumBytes);
}

struct Insn {
  uint16_t code;
  uint8_t jt;
  uint8_t jf;
  uint32_t k;
};

}  // namespace

int64_t burst_bytes(int64_t rate_bps) { return std::max<int64_t>(32 * 1024, rate_bps / 8 / 1000); }

std::string flow_classifier_bytecode(uint32_t major, uint32_t first_minor, int buckets) {
  ACS_ENFORCE(buckets > 0 && (buckets & (buckets - 1)) == 0 && buckets <= 0x1000,
              "flow buckets {} must be a power of two up to 4096", buckets);
  ACS_ENFORCE(major > 0 && major <= 0xffff && first_minor + buckets <= 0xffff,
              "classid {:x}:{:x} + {} buckets is out of range", major, first_minor, buckets);
  // tc hands cls_bpf the frame from the Ethernet header: IPv4 at 14, its protocol byte at 23.
  constexpr uint8_t kNoMatch = 15;  // index of the final `ret #0`
  const Insn program[] = {
      {BPF_LD | BPF_H | BPF_ABS, 0, 0, 12},                  // 0: A = ethertype
      {BPF_JMP | BPF_JEQ | BPF_K, 0, kNoMatch - 2, 0x0800},  // 1: IPv4?
      {BPF_LD | BPF_B | BPF_ABS, 0, 0, 23},                  // 2: A = IP protocol
      {BPF_JMP | BPF_JEQ | BPF_K, 0, kNoMatch - 4, 6},       // 3: TCP?
      {BPF_LD | BPF_H | BPF_ABS, 0, 0, 20},                  // 4: A = flags + fragment offset
      {BPF_JMP | BPF_JSET | BPF_K, kNoMatch - 6, 0, 0x1fff}, // 5: a later fragment has no ports
      {BPF_LDX | BPF_B | BPF_MSH, 0, 0, 14},                 // 6: X = IP header length
      {BPF_LD | BPF_H | BPF_IND, 0, 0, 14},                  // 7: A = source port
      {BPF_ST, 0, 0, 0},                                     // 8: M[0] = A
      {BPF_LD | BPF_H | BPF_IND, 0, 0, 16},                  // 9: A = destination port
      {BPF_LDX | BPF_W | BPF_MEM, 0, 0, 0},                  // 10: X = M[0]
      {BPF_ALU | BPF_ADD | BPF_X, 0, 0, 0},                  // 11: A = sport + dport
      {BPF_ALU | BPF_AND | BPF_K, 0, 0, static_cast<uint32_t>(buckets - 1)},  // 12: bucket
      {BPF_ALU | BPF_ADD | BPF_K, 0, 0, (major << 16) | first_minor},         // 13: classid
      {BPF_RET | BPF_A, 0, 0, 0},                            // 14: return it
      {BPF_RET | BPF_K, 0, 0, 0},                            // kNoMatch: default class
  };
  // The jumps above are relative to kNoMatch: keep it the index of the last instruction.
  static_assert(sizeof(program) / sizeof(program[0]) == kNoMatch + 1, "kNoMatch must be the last");
  std::string out = std::to_string(sizeof(program) / sizeof(program[0]));
  for (const Insn& insn : program) {
    out += fmt::format(",{} {} {} {}", insn.code, insn.jt, insn.jf, insn.k);
  }
  return out;
}

ToolCommand shaping_command(const std::string& netns, const std::string& dev, const LinkShape& shape) {
  ACS_ENFORCE(shape.rate_bps > 0, "shaping {} in {} needs a rate", dev, netns);
  std::string lines = fmt::format("qdisc add dev {} root handle 1: htb default 2\n", dev);
  lines += htb_class(dev, "1:", "1:1", shape.rate_bps, shape.rate_bps);
  if (!shape.flow_rate_bps) {
    lines += htb_class(dev, "1:1", "1:2", shape.rate_bps, shape.rate_bps);
  } else {
    // Non-TCP traffic (ARP) is tiny: a small guarantee, may borrow up to the link rate.
    lines += htb_class(dev, "1:1", "1:2", std::max<int64_t>(kMinRateBps, shape.rate_bps / 100),
                       shape.rate_bps);
    for (int bucket = 0; bucket < kFlowBuckets; ++bucket) {
      lines += htb_class(dev, "1:1", fmt::format("1:{:x}", kFlowFirstMinor + bucket),
                         *shape.flow_rate_bps, *shape.flow_rate_bps);
    }
    lines += fmt::format("filter add dev {} parent 1: prio 1 bpf bytecode \"{}\"\n", dev,
                         flow_classifier_bytecode(1, kFlowFirstMinor, kFlowBuckets));
  }
  return {{"tc", "-n", netns, "-batch", "-"}, std::move(lines)};
}

std::vector<ToolCommand> bring_up_commands(const ClusterLayout& layout, const Profile& profile) {
  ACS_ENFORCE_EQ(layout.nodes.size(), static_cast<size_t>(profile.nodes),
                 "layout and profile disagree on the node count");
  std::vector<ToolCommand> out;
  for (const auto& netns : layout.all_netns()) out.push_back({{"ip", "netns", "add", netns}, {}});
  const std::string hub = layout.hub_netns;
  const std::string bridge(kBridge);
  out.push_back(ip(hub, {"link", "add", bridge, "type", "bridge"}));
  out.push_back(ip(hub, {"link", "set", bridge, "up"}));
  for (const auto& node : layout.nodes) {
    out.push_back(ip(hub, {"link", "add", node.hub_port, "type", "veth", "peer", "name",
                           node.ifname, "netns", node.netns}));
    out.push_back(ip(hub, {"link", "set", node.hub_port, "master", bridge}));
    out.push_back(ip(hub, {"link", "set", node.hub_port, "up"}));
    out.push_back(ip(node.netns, {"link", "set", "lo", "up"}));
    out.push_back(ip(node.netns, {"addr", "add", fmt::format("{}/{}", node.address, kPrefixLength),
                                  "dev", node.ifname}));
    out.push_back(ip(node.netns, {"link", "set", node.ifname, "up"}));
  }
  if (profile.rate_bps) {
    for (const auto& node : layout.nodes) {
      out.push_back(shaping_command(node.netns, node.ifname, {*profile.rate_bps, profile.flow_rate_bps}));
      out.push_back(shaping_command(hub, node.hub_port, {*profile.rate_bps, std::nullopt}));
    }
  }
  return out;
}

}  // namespace acspeed::testbed
