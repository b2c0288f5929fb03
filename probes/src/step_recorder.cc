#include "acspeed/step_recorder.h"

#include "acspeed/cpu_recorder.h"
#include "acspeed/error.h"
#ifdef ACSPEED_PROBES_WITH_CUPTI
#include "acspeed/cupti_recorder.h"
#endif

namespace acspeed {
namespace {

// The ordered list: the most precise backend first.
std::vector<std::unique_ptr<StepRecorder>> make_recorders() {
  std::vector<std::unique_ptr<StepRecorder>> out;
#ifdef ACSPEED_PROBES_WITH_CUPTI
  out.push_back(std::make_unique<CuptiRecorder>(make_cupti_api()));
#endif
  out.push_back(std::make_unique<CpuRecorder>());
  return out;
}

}  // namespace

std::vector<std::string> recorder_names() {
  std::vector<std::string> out;
  for (const auto& r : make_recorders()) out.push_back(r->name());
  return out;
}

SelectedRecorder select_recorder(const ProbeOptions& options) {
  return select_recorder(options, make_recorders());
}

SelectedRecorder select_recorder(const ProbeOptions& options,
                                 std::vector<std::unique_ptr<StepRecorder>> recorders) {
  if (options.device != "cpu" && options.device != "cuda") {
    ACS_THROW(InvalidArgument, "probe device '{}' is not one of cpu, cuda", options.device);
  }
  std::string accepted = "auto";
  for (const auto& r : recorders) accepted += ", " + r->name();
  bool known = options.backend == "auto";
  for (const auto& r : recorders) known = known || r->name() == options.backend;
  if (!known) {
    ACS_THROW(InvalidArgument, "probe backend '{}' is not one of {} (in this build)",
              options.backend, accepted);
  }

  SelectedRecorder out;
  for (auto& r : recorders) {
    if (options.backend != "auto" && r->name() != options.backend) continue;
    std::string why_not;
    if (r->enabled(options, &why_not)) {
      try {
        r->start();
        out.recorder = std::move(r);
        return out;
      } catch (const Error& e) {
        why_not = fmt::format("failed to start: {}", e.what());
      }
    }
    if (options.backend != "auto") {
      ACS_THROW(InvalidArgument, "probe backend '{}' is unavailable: {}", options.backend, why_not);
    }
    out.notes.push_back(fmt::format("{}: unavailable: {}", r->name(), why_not));
  }
  // Only when the list lacks the always-enabled CPU backend.
  ACS_THROW(Error, "no probe backend is enabled ({})", accepted);
}

}  // namespace acspeed
