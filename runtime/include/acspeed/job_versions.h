// The library versions a job runs with, as the job's own torch reports them (`python -m
// acspeed.versions`, which the trial workers and `import acspeed` also call): torch, the NCCL and
// CUDA the job uses (torch's own, only when torch can use CUDA: a CPU job uses none, and then has
// no version to check), and the NCCL and CUDA torch bundles whether it uses them or not.
//
// Every command and report shows them through describe() and its parts, so `fingerprint`,
// `explain`, `configs show` and the reports say the same thing:
//   GPU job: "torch 2.11.0, NCCL 2.27.3, CUDA 13.0"
//   CPU job: "torch 2.15.0, NCCL: not used (CPU job; torch bundles 2.30.7), CUDA: not used (CPU job; torch bundles 13.2)"
// Decisions record only the used versions (the lookup compares those); what torch bundles comes
// from the session's versions where it was recorded.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

namespace acspeed {

struct JobVersions {
  std::string torch;       // "2.15.0"; "" = unknown
  std::string nccl, cuda;  // used by the job; "" = not used (a CPU job)
  std::string torch_nccl, torch_cuda;  // bundled with torch; "" = none or not recorded
};

// From an object with string fields "torch", "nccl", "cuda", "torch_nccl", "torch_cuda" (the
// module's output, a session's versions); missing or non-string fields stay "".
JobVersions job_versions_from_json(const nlohmann::json& j);

// The value alone, for tables: "2.27.3", "not used (CPU job; torch bundles 2.30.7)", "not used (CPU job)".
std::string nccl_text(const JobVersions& v);
std::string cuda_text(const JobVersions& v);
// With the name: "NCCL 2.27.3", "NCCL: not used (CPU job; torch bundles 2.30.7)".
std::string describe_nccl(const JobVersions& v);
std::string describe_cuda(const JobVersions& v);
// "torch 2.15.0, " + describe_nccl + ", " + describe_cuda ("torch unknown" without a torch version).
std::string describe(const JobVersions& v);

}  // namespace acspeed
