// The busy time of a set of CPU cores, from the kernel's per-core counters (/proc/stat): what a step
// costs the cores a rank may run on, its own threads' work and everything else on those cores
// (gloo's threads, the network stack's softirq, other processes). The step model's CPU floor
// (tuner/include/acspeed/tuner/step_model.h): a step cannot be shorter than the busy time it needs
// from its cores divided by their count.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace acspeed {

// Busy seconds (user, nice, system, irq, softirq, steal; not idle or iowait) summed over `cores`
// in the text of a /proc/stat; cores missing from it count nothing. ticks_per_s: the counters'
// unit (sysconf(_SC_CLK_TCK)). InvalidArgument for a per-core line that does not parse.
double busy_seconds(std::string_view proc_stat, const std::vector<int>& cores, long ticks_per_s);

// busy_seconds() of this machine now; nullopt where /proc/stat cannot be read (not Linux).
std::optional<double> cores_busy_seconds(const std::vector<int>& cores);

}  // namespace acspeed
