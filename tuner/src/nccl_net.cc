#include "acspeed/tuner/nccl_net.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "acspeed/settings.h"

namespace acspeed::tuner {
namespace {

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

NcclNet nccl_net(const std::string& infiniband_dir) {
  if (const auto net = setting_raw("NCCL_NET")) {
    if (same_name(*net, "Socket")) return {true, "NCCL_NET=Socket"};
    return {false, fmt::format("NCCL_NET={} names another net than Socket", *net)};
  }
  if (const auto plugin = setting_raw("NCCL_NET_PLUGIN"); plugin && !same_name(*plugin, "none")) {
    return {false, fmt::format("NCCL_NET_PLUGIN={}: a net plugin carries the traffic", *plugin)};
  }
  if (setting_raw("NCCL_IB_DISABLE").value_or("0") == "1") return {true, "NCCL_IB_DISABLE=1, no NCCL_NET_PLUGIN"};
  std::vector<std::string> devices;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(infiniband_dir, ec)) {
    devices.push_back(entry.path().filename().string());
  }
  std::sort(devices.begin(), devices.end());
  if (!devices.empty()) {
    return {false, fmt::format("RDMA device(s) in {}: {} (NCCL's IB net)", infiniband_dir, fmt::join(devices, ","))};
  }
  return {true, fmt::format("no {} device, no NCCL_NET_PLUGIN or NCCL_NET", infiniband_dir)};
}

std::optional<std::string> nccl_net_in_log(std::string_view log) {
  // What follows the prefix (optional timestamp, HOST:PID:TID [DEV]) on an INFO line: never a WARN,
  // TRACE or VERSION line, nor a plugin's own words that mention a network.
  constexpr std::string_view kMarker = "] NCCL INFO Using network ";
  for (size_t at = log.find(kMarker); at != std::string_view::npos; at = log.find(kMarker, at + 1)) {
    const size_t start = at + kMarker.size();
    const size_t end = std::min(log.find('\n', start), log.size());
    std::string_view name = log.substr(start, end - start);
    while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.remove_suffix(1);
    if (!name.empty()) return std::string(name);
  }
  return std::nullopt;
}

std::optional<NcclNet> nccl_net_from_logs(const std::string& folder, std::string_view prefix) {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
    if (entry.path().filename().string().rfind(prefix, 0) != 0) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (auto name = nccl_net_in_log(text)) names.insert(std::move(*name));
  }
  if (names.empty()) return std::nullopt;
  const bool socket = names.size() == 1 && same_name(*names.begin(), "Socket");
  return NcclNet{socket, fmt::format("NCCL's INFO line: Using network {}", fmt::join(names, " / "))};
}

std::string nccl_net_note(const NcclNet& planned, const NcclNet& seen) {
  if (planned.socket == seen.socket) return fmt::format("NCCL's net: {}, as the plan saw it ({})", seen.why, planned.why);
  if (!seen.socket) {
    return fmt::format("NCCL's net: {}, not Socket as the plan saw it ({}): the line wins (it is what NCCL did); "
                       "NCCL's sockets change nothing on that net, so no decision keeps a sockets value",
                       seen.why, planned.why);
  }
  return fmt::format("NCCL's net: {}, although the plan saw another ({}): the line wins (it is what NCCL did), but "
                     "NCCL's sockets were not searched; to search them, run with NCCL_NET=Socket (NCCL's choice here "
                     "anyway) and --nccl-sockets",
                     seen.why, planned.why);
}

std::string gate_nccl_sockets(SearchSpace& space, int nnodes, bool gpus_shared, const NcclNet& net) {
  const std::vector<std::optional<NcclSockets>> nccl_choice = {std::nullopt};
  if (space.nccl_sockets == nccl_choice) return "";
  if (std::any_of(space.pinned.begin(), space.pinned.end(),
                  [](const std::string& p) { return p.rfind("nccl_sockets ", 0) == 0; })) {
    return "";
  }
  std::string why_not;
  for (const char* variable : {"NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD"}) {
    if (const auto value = setting_raw(variable); value && why_not.empty()) {
      why_not = fmt::format("{}={} is set in this environment and the workers inherit it (unset it to search them)",
                            variable, *value);
    }
  }
  if (why_not.empty() && nnodes == 1 && !gpus_shared) {
    why_not = "one node: NCCL connects its GPUs without its net (P2P, shared memory)";
  }
  if (why_not.empty() && !net.socket) why_not = fmt::format("NCCL's net here is not Socket: {}", net.why);
  std::vector<std::string> values;
  for (const auto& v : space.nccl_sockets) values.push_back(to_string(v));
  if (!why_not.empty()) {
    space.nccl_sockets = nccl_choice;
    return fmt::format("NCCL sockets {} not searched (NCCL's choice kept): {}", fmt::join(values, ","), why_not);
  }
  return fmt::format("NCCL sockets {} searched: NCCL's net is Socket ({}); each value runs in workers launched with "
                     "NCCL_SOCKET_NTHREADS/NCCL_NSOCKS_PERTHREAD set, so a trial whose value differs from the one "
                     "before relaunches the workers",
                     fmt::join(values, ","), net.why);
}

}  // namespace acspeed::tuner
