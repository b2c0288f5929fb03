#include "acspeed/job_versions.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace acspeed {
namespace {

std::string field(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

std::string version_text(const std::string& used, const std::string& bundled) {
  if (!used.empty()) return used;
  return fmt::format("not used (CPU job{})", bundled.empty() ? "" : "; torch bundles " + bundled);
}

std::string with_name(const char* name, const std::string& used, const std::string& text) {
  return fmt::format(used.empty() ? "{}: {}" : "{} {}", name, text);
}

}  // namespace

JobVersions job_versions_from_json(const nlohmann::json& j) {
  return {field(j, "torch"), field(j, "nccl"), field(j, "cuda"), field(j, "torch_nccl"), field(j, "torch_cuda")};
}

std::string nccl_text(const JobVersions& v) { return version_text(v.nccl, v.torch_nccl); }

std::string cuda_text(const JobVersions& v) { return version_text(v.cuda, v.torch_cuda); }

std::string describe_nccl(const JobVersions& v) { return with_name("NCCL", v.nccl, nccl_text(v)); }

std::string describe_cuda(const JobVersions& v) { return with_name("CUDA", v.cuda, cuda_text(v)); }

std::string describe(const JobVersions& v) {
  return fmt::format("torch {}, {}, {}", v.torch.empty() ? "unknown" : v.torch, describe_nccl(v), describe_cuda(v));
}

}  // namespace acspeed
