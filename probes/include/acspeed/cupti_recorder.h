// The CUPTI backend: GPU activity (kernels, memcpy, memset) inside each step's window.
//
// Step windows are host marks on CUPTI's clock (step_begin .. step_end; the caller synchronizes the
// device before step_end so the step's work lies inside). Kernels named like NCCL's device kernels
// are communication (kernel_class.h); all other kernels, memcpy and memset are compute. A bucket's
// communication kernels are found by external correlation: bucket_launched(i) tags the CUDA work the
// calling thread launches next with (step, i), so every NCCL kernel the hook issues for bucket i
// carries that tag; an NCCL kernel with no tag for the current step counts as untagged
// communication. Profiles then follow step_profile.h's definitions on these device spans.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "acspeed/cupti_api.h"
#include "acspeed/step_recorder.h"

namespace acspeed {

class CuptiRecorder : public StepRecorder {
 public:
  explicit CuptiRecorder(std::unique_ptr<CuptiApi> api);
  ~CuptiRecorder() override;

  std::string name() const override { return "cupti"; }
  bool enabled(const ProbeOptions& options, std::string* why_not) override;
  void start() override;
  bool needs_grad_marks() const override { return false; }

  void step_begin() override;
  void grad_ready() override {}
  void bucket_launched(int index, int64_t bytes) override;
  void bucket_completed(int) override {}
  void backward_end() override;
  void step_end() override;

  std::vector<StepProfile> profiles() override;
  void reset() override;
  int64_t unmatched_events() const override;
  std::vector<std::string> warnings() const override;

  // (step, bucket) <-> external correlation id.
  static uint64_t external_id(int64_t step, int bucket);

 private:
  struct DeviceSpan {
    Interval span;
    uint32_t correlation_id;
    bool communication;
  };
  struct StepMarks {
    int64_t id = -1;  // never reused, even across reset(), so stale tags cannot match
    int64_t begin_ns = -1;
    int64_t end_ns = -1;
    std::vector<BucketLaunch> buckets;
  };
  void consume(uint8_t* buffer, size_t valid_bytes);
  StepTimeline timeline(const StepMarks& marks) const;

  std::unique_ptr<CuptiApi> api_;
  bool started_ = false;
  mutable std::mutex mu_;  // guards everything below (CUPTI delivers buffers on its own thread)
  bool open_ = false;
  int64_t next_step_id_ = 0;
  StepMarks current_;
  std::vector<StepMarks> done_;
  std::vector<DeviceSpan> spans_;
  std::unordered_map<uint32_t, uint64_t> bucket_tags_;  // correlation id -> external id
  int64_t records_ = 0;
  int64_t unmatched_ = 0;
};

}  // namespace acspeed
