#include "acspeed/fingerprint.h"

#include <dlfcn.h>
#include <sched.h>

#include <cctype>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "acspeed/settings.h"

namespace acspeed {
namespace {

// A dlopen'ed library closed on scope exit.
class Library {
 public:
  explicit Library(const char* name) : handle_(dlopen(name, RTLD_NOW | RTLD_LOCAL)) {}
  ~Library() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  explicit operator bool() const { return handle_ != nullptr; }
  template <typename Fn>
  Fn symbol(const char* name) const {
    return handle_ == nullptr ? nullptr : reinterpret_cast<Fn>(dlsym(handle_, name));
  }

 private:
  void* handle_;
};

// "Intel(R) Xeon(R) Platinum 8369B CPU @ 2.70GHz" -> "Intel-Xeon-Platinum-8369B"
std::string sanitize(const std::string& text) {
  std::string cleaned = text;
  for (const char* noise : {"(R)", "(TM)", "(tm)", "(r)", " CPU", " Processor"}) {
    for (auto pos = cleaned.find(noise); pos != std::string::npos; pos = cleaned.find(noise)) {
      cleaned.erase(pos, std::string(noise).size());
    }
  }
  if (auto at = cleaned.find(" @ "); at != std::string::npos) cleaned.erase(at);
  std::string out;
  for (char c : cleaned) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_') {
      out += c;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "unknown" : out;
}

std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    for (const char* key : {"model name", "Model", "cpu model"}) {
      if (line.rfind(key, 0) == 0) {
        auto colon = line.find(':');
        if (colon != std::string::npos) {
          auto value = line.substr(colon + 1);
          value.erase(0, value.find_first_not_of(" \t"));
          if (!value.empty()) return value;
        }
      }
    }
  }
  return "unknown";
}

int count_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::thread::hardware_concurrency());
}

}  // namespace

std::string major_minor(const std::string& version) {
  auto first = version.find('.');
  if (first == std::string::npos) return version;
  auto second = version.find_first_not_of("0123456789", first + 1);
  return version.substr(0, second);
}

std::optional<GpuInfo> detect_gpus() {
  Library nvml("libnvidia-ml.so.1");
  if (!nvml) return std::nullopt;
  using InitFn = int (*)();
  using CountFn = int (*)(unsigned*);
  using HandleFn = int (*)(unsigned, void**);
  using NameFn = int (*)(void*, char*, unsigned);
  using DriverFn = int (*)(char*, unsigned);
  using LinkFn = int (*)(void*, unsigned, int*);
  auto init = nvml.symbol<InitFn>("nvmlInit_v2");
  auto shutdown = nvml.symbol<InitFn>("nvmlShutdown");
  auto count_fn = nvml.symbol<CountFn>("nvmlDeviceGetCount_v2");
  auto handle_fn = nvml.symbol<HandleFn>("nvmlDeviceGetHandleByIndex_v2");
  auto name_fn = nvml.symbol<NameFn>("nvmlDeviceGetName");
  auto driver_fn = nvml.symbol<DriverFn>("nvmlSystemGetDriverVersion");
  auto link_fn = nvml.symbol<LinkFn>("nvmlDeviceGetNvLinkState");
  if (!init || !shutdown || !count_fn || !handle_fn || !name_fn || init() != 0) return std::nullopt;
  GpuInfo info;
  unsigned count = 0;
  void* device = nullptr;
  char buffer[96] = {0};
  if (count_fn(&count) == 0 && count > 0 && handle_fn(0, &device) == 0 &&
      name_fn(device, buffer, sizeof(buffer)) == 0) {
    info.count = static_cast<int>(count);
    info.model = buffer;
    if (driver_fn && driver_fn(buffer, sizeof(buffer)) == 0) info.driver_version = buffer;
    for (unsigned link = 0; link_fn && link < 18; ++link) {
      int active = 0;
      if (link_fn(device, link, &active) == 0 && active != 0) {
        info.nvlink = true;
        break;
      }
    }
  }
  shutdown();
  if (info.count == 0) return std::nullopt;
  return info;
}

std::string hardware_key(const std::optional<GpuInfo>& gpu, const std::string& cpu_model,
                         int cpu_cores) {
  if (gpu && gpu->count > 0) {
    return fmt::format("{}x{}{}", gpu->count, sanitize(gpu->model), gpu->nvlink ? "-nvlink" : "-pcie");
  }
  return fmt::format("cpu-{}x{}", cpu_cores, sanitize(cpu_model));
}

Fingerprint fingerprint(const FingerprintOptions& options) {
  Fingerprint fp;
  const auto gpu = options.gpu ? options.gpu : detect_gpus();
  const std::string cpu_model = options.cpu_model ? *options.cpu_model : read_cpu_model();
  const int cores = options.cpu_cores ? *options.cpu_cores : count_cores();
  fp.detected_key = hardware_key(gpu, cpu_model, cores);
  if (auto name = setting_string("ACSPEED_INSTANCE_TYPE")) {
    fp.instance_type = *name;
    fp.explicit_name = true;
  } else {
    fp.instance_type = fp.detected_key;
  }
  fp.details["cpu_model"] = cpu_model;
  fp.details["cpu_cores"] = std::to_string(cores);
  if (gpu) {
    fp.details["gpu_model"] = gpu->model;
    fp.details["gpu_count"] = std::to_string(gpu->count);
    fp.details["interconnect"] = gpu->nvlink ? "nvlink" : "pcie";
    fp.details["driver"] = gpu->driver_version;
  } else {
    fp.details["gpu_count"] = "0";
  }
  if (options.versions) {
    fp.details["torch"] = options.versions->torch.empty() ? "unknown" : options.versions->torch;
    fp.details["nccl"] = nccl_text(*options.versions);
    fp.details["cuda"] = cuda_text(*options.versions);
  } else {
    fp.details["torch"] = fp.details["nccl"] = fp.details["cuda"] = "unknown";
  }
  return fp;
}

}  // namespace acspeed
