#include "acspeed/cpu_busy.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "acspeed/error.h"

namespace acspeed {
namespace {

// /proc/stat's per-core columns after the name: user nice system idle iowait irq softirq steal ...
constexpr int kColumns = 8;
constexpr bool kBusy[kColumns] = {true, true, true, false, false, true, true, true};

}  // namespace

double busy_seconds(std::string_view proc_stat, const std::vector<int>& cores, long ticks_per_s) {
  if (ticks_per_s <= 0) ACS_THROW(InvalidArgument, "ticks per second must be positive, got {}", ticks_per_s);
  long long ticks = 0;
  std::istringstream lines{std::string(proc_stat)};
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("cpu", 0) != 0 || line.size() < 4 || line[3] < '0' || line[3] > '9') continue;
    std::istringstream fields(line);
    std::string name;
    fields >> name;
    const int core = std::atoi(name.c_str() + 3);
    if (std::find(cores.begin(), cores.end(), core) == cores.end()) continue;
    for (int column = 0; column < kColumns; ++column) {
      long long value = 0;
      if (!(fields >> value)) {
        if (column >= 4) break;  // old kernels have fewer columns; the first four are always there
        ACS_THROW(InvalidArgument, "/proc/stat line '{}' does not parse: expected numbers after the core's name", line);
      }
      if (kBusy[column]) ticks += value;
    }
  }
  return static_cast<double>(ticks) / static_cast<double>(ticks_per_s);
}

std::optional<double> cores_busy_seconds(const std::vector<int>& cores) {
  std::ifstream in("/proc/stat");
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return busy_seconds(text.str(), cores, sysconf(_SC_CLK_TCK));
}

}  // namespace acspeed
