// The CPU backend: host clocks around the step, the gradients and the comm hook's futures.
//
// Per step it builds this timeline (compute_end = the last grad_ready(), or backward_end() if no
// gradient was marked in the step):
//   compute: [step_begin, compute_end) and [backward_end, step_end)  (forward+backward, optimizer)
//   comm, when the comm hook reported buckets (BucketObserver):
//            [bucket_launched(i), bucket_completed(i)) for each bucket, tagged i. Exposed
//            communication is then the part of those spans after the last gradient: from the end
//            of backward compute to the last bucket's completion. The rest of the wait for
//            backward to return (DDP copying bucket results back into .grad) is neither.
//   comm, when no bucket was reported (DDP's built-in allreduce, the baseline, has no hook):
//            [compute_end, backward_end), the autograd boundary: after its last gradient the step
//            only waits for DDP to finish. This measures the baseline without touching its
//            communication path, as an upper bound: it includes DDP's own finalize work (the copy
//            back into .grad, a few ms for tens of MB on a CPU). A world-size-1 run of the same
//            model, where that wait holds no network time, measures that part to subtract.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "acspeed/step_recorder.h"

namespace acspeed {

class CpuRecorder : public StepRecorder {
 public:
  using Clock = std::function<int64_t()>;  // nanoseconds, monotonic
  // Default clock: std::chrono::steady_clock.
  CpuRecorder();
  explicit CpuRecorder(Clock clock);

  std::string name() const override { return "cpu"; }
  bool enabled(const ProbeOptions& options, std::string* why_not) override;
  void start() override {}
  bool needs_grad_marks() const override { return true; }

  void step_begin() override;
  void grad_ready() override;
  void bucket_launched(int index, int64_t bytes) override;
  void bucket_completed(int index) override;
  void backward_end() override;
  void step_end() override;

  std::vector<StepProfile> profiles() override;
  void reset() override;
  int64_t unmatched_events() const override { return unmatched_.load(); }
  std::vector<std::string> warnings() const override { return {}; }

 private:
  struct BucketMarks {
    int index;
    int64_t bytes;
    int64_t launched_ns;
    int64_t completed_ns;  // -1 until completed
  };
  struct StepMarks {
    int64_t begin_ns = -1;
    int64_t last_grad_ns = -1;
    int64_t backward_end_ns = -1;
    int64_t end_ns = -1;
    std::vector<BucketMarks> buckets;
  };
  StepTimeline timeline(const StepMarks& marks) const;

  Clock clock_;
  mutable std::mutex mu_;
  bool open_ = false;
  StepMarks current_;
  std::atomic<int64_t> last_grad_ns_{-1};
  std::vector<StepMarks> done_;
  std::atomic<int64_t> unmatched_{0};
};

}  // namespace acspeed
