// The instance fingerprint: a stable, human-readable key for one node's hardware, which decisions
// are stored under, plus details recorded beside it. Never the hostname.
//   GPU node: "8xNVIDIA-H200-nvlink"   CPU node: "cpu-2xIntel-Xeon-Platinum-8369B"
// ACSPEED_INSTANCE_TYPE (e.g. "ecs.ebmgn7t.32xlarge" or an emulated-cluster profile) takes
// precedence over the detected key. GPU libraries are loaded with dlopen, so this works (and
// reports a CPU node) on a machine without a GPU driver.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "acspeed/job_versions.h"

namespace acspeed {

struct GpuInfo {
  std::string model;       // "NVIDIA H200"
  int count = 0;           // GPUs on this node
  bool nvlink = false;     // any NVLink active on GPU 0
  std::string driver_version;
};

struct FingerprintOptions {
  // The versions the job's torch reports (job_versions.h), which only the caller knows; nullopt:
  // "unknown" in the details (the key never depends on them).
  std::optional<JobVersions> versions;
  // Overrides for tests; nullopt = detect.
  std::optional<GpuInfo> gpu;
  std::optional<std::string> cpu_model;
  std::optional<int> cpu_cores;
};

struct Fingerprint {
  std::string instance_type;  // the key decisions are stored under
  std::string detected_key;   // what the hardware says, even when an explicit name is used
  bool explicit_name = false; // instance_type came from ACSPEED_INSTANCE_TYPE
  // Recorded beside the key: gpu_model, gpu_count, interconnect, driver, cpu_model, cpu_cores, and
  // the job's torch, nccl and cuda as job_versions.h writes them ("not used (CPU job; ...)").
  std::map<std::string, std::string> details;
};

Fingerprint fingerprint(const FingerprintOptions& options = {});

// The hardware key for a node; pure function of its inputs (unit-tested).
std::string hardware_key(const std::optional<GpuInfo>& gpu, const std::string& cpu_model, int cpu_cores);

std::optional<GpuInfo> detect_gpus();

// "major.minor" of a version string such as "2.28.9" or "2.15.0+cu132"; the input when it has no dot.
std::string major_minor(const std::string& version);

}  // namespace acspeed
