// A step recorder turns marks from the training loop (and from the comm hook) into step profiles.
// Two implementations exist, chosen at run time from an ordered list, the first enabled one winning:
//   1. "cupti": CUPTI activity tracing of the GPU (compute vs NCCL kernels, memcpy/memset); only
//      when the model is on a CUDA device, a driver and device exist, CUPTI loads and no other CUPTI
//      client (torch.profiler/Kineto, Nsight) holds the process's one subscriber slot.
//   2. "cpu": host clocks (always enabled).
// Every disabled backend, or one whose start() threw, says why (SelectedRecorder::notes).
//
// The marks, in the order a training step makes them:
//   step_begin()                  before the forward pass
//   grad_ready()                  each time a parameter's gradient has been accumulated (hook)
//   bucket_launched(i, bytes)     by the comm hook just before it issues bucket i's collective(s),
//                                 on the thread that issues them
//   bucket_completed(i)           by the comm hook when bucket i's result is ready (any thread)
//   backward_end()                when loss.backward() has returned
//   step_end()                    after the optimizer step (and, for a CUDA model, after the caller
//                                 synchronized the device)
// Misuse of the step marks (step_end without step_begin, ...) throws acspeed::Error. The bucket
// marks never throw: they run inside DDP's communication, where an exception would kill the job;
// events that match no open step are counted (unmatched_events()).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "acspeed/step_profile.h"

namespace acspeed {

struct ProbeOptions {
  // Where the model's parameters live: "cpu" or "cuda".
  std::string device = "cpu";
  // "auto" = first enabled backend in the list; "cupti" or "cpu" = that one, or InvalidArgument
  // with its reason when it is not enabled.
  std::string backend = "auto";
  // Set when the caller knows another profiler (torch.profiler) is running in this process.
  bool external_profiler_active = false;
};

class StepRecorder {
 public:
  virtual ~StepRecorder() = default;
  virtual std::string name() const = 0;
  // Whether this backend can measure here; when not, *why_not says why.
  virtual bool enabled(const ProbeOptions& options, std::string* why_not) = 0;
  // Starts measuring (called once, on the selected backend only).
  virtual void start() = 0;
  // Whether grad_ready() marks are used (the caller may skip registering gradient hooks otherwise).
  virtual bool needs_grad_marks() const = 0;

  virtual void step_begin() = 0;
  virtual void grad_ready() = 0;
  virtual void bucket_launched(int index, int64_t bytes) = 0;
  virtual void bucket_completed(int index) = 0;
  virtual void backward_end() = 0;
  virtual void step_end() = 0;

  // Profiles of the completed steps, in order.
  virtual std::vector<StepProfile> profiles() = 0;
  // Forgets recorded steps (between trials); fails if a step is open.
  virtual void reset() = 0;
  virtual int64_t unmatched_events() const = 0;
  // Problems noticed while measuring (e.g. CUPTI delivered no records), for the summary.
  virtual std::vector<std::string> warnings() const = 0;
};

struct SelectedRecorder {
  std::unique_ptr<StepRecorder> recorder;
  std::vector<std::string> notes;  // "cupti: unavailable: <reason>" for each backend skipped
};

// Backend names in selection order (only those built in).
std::vector<std::string> recorder_names();
// Walks the ordered list and starts the first enabled backend.
SelectedRecorder select_recorder(const ProbeOptions& options);
// The same over a given ordered list (tests pass fakes).
SelectedRecorder select_recorder(const ProbeOptions& options,
                                 std::vector<std::unique_ptr<StepRecorder>> recorders);

}  // namespace acspeed
