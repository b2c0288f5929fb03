#include "acspeed/cpu_recorder.h"

#include <algorithm>
#include <chrono>

#include "acspeed/error.h"

namespace acspeed {
namespace {

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

CpuRecorder::CpuRecorder() : CpuRecorder(steady_now_ns) {}
CpuRecorder::CpuRecorder(Clock clock) : clock_(std::move(clock)) {}

bool CpuRecorder::enabled(const ProbeOptions&, std::string*) { return true; }

void CpuRecorder::step_begin() {
  const int64_t now = clock_();
  std::lock_guard<std::mutex> lock(mu_);
  if (open_) ACS_THROW(Error, "step_begin() called again before step_end() (step {})", done_.size());
  open_ = true;
  current_ = StepMarks{};
  current_.begin_ns = now;
  last_grad_ns_.store(-1);
}

void CpuRecorder::grad_ready() { last_grad_ns_.store(clock_(), std::memory_order_relaxed); }

void CpuRecorder::bucket_launched(int index, int64_t bytes) {
  const int64_t now = clock_();
  std::lock_guard<std::mutex> lock(mu_);
  if (!open_ || current_.backward_end_ns >= 0) {
    unmatched_.fetch_add(1);
    return;
  }
  current_.buckets.push_back({index, bytes, now, -1});
}

void CpuRecorder::bucket_completed(int index) {
  const int64_t now = clock_();
  std::lock_guard<std::mutex> lock(mu_);
  if (open_) {
    for (auto& b : current_.buckets) {
      if (b.index == index && b.completed_ns < 0) {
        b.completed_ns = now;
        return;
      }
    }
  }
  unmatched_.fetch_add(1);
}

void CpuRecorder::backward_end() {
  const int64_t now = clock_();
  std::lock_guard<std::mutex> lock(mu_);
  if (!open_) ACS_THROW(Error, "backward_end() called outside a step (call step_begin() first)");
  if (current_.backward_end_ns >= 0) {
    ACS_THROW(Error, "backward_end() called twice in step {}", done_.size());
  }
  current_.backward_end_ns = now;
  current_.last_grad_ns = last_grad_ns_.load();
}

void CpuRecorder::step_end() {
  const int64_t now = clock_();
  std::lock_guard<std::mutex> lock(mu_);
  if (!open_) ACS_THROW(Error, "step_end() called without step_begin()");
  if (current_.backward_end_ns < 0) {
    ACS_THROW(Error,
              "backward_end() was not marked in step {}: the CPU probe needs it to separate "
              "backward compute from the wait for communication",
              done_.size());
  }
  current_.end_ns = now;
  for (auto& b : current_.buckets) {
    if (b.completed_ns < 0) unmatched_.fetch_add(1);
  }
  done_.push_back(std::move(current_));
  current_ = StepMarks{};
  open_ = false;
}

StepTimeline CpuRecorder::timeline(const StepMarks& m) const {
  // A gradient marked before this step began (or none at all) says nothing about this step.
  const int64_t compute_end =
      (m.last_grad_ns >= m.begin_ns && m.last_grad_ns <= m.backward_end_ns) ? m.last_grad_ns
                                                                             : m.backward_end_ns;
  StepTimeline t;
  t.window = {m.begin_ns, m.end_ns};
  t.compute = {{m.begin_ns, compute_end}, {m.backward_end_ns, m.end_ns}};
  if (m.buckets.empty()) t.comm.push_back({{compute_end, m.backward_end_ns}, -1});
  for (const auto& b : m.buckets) {
    // A bucket whose completion was never reported counts until backward returned (DDP waited).
    const int64_t end = b.completed_ns >= b.launched_ns ? b.completed_ns : m.backward_end_ns;
    t.comm.push_back({{b.launched_ns, std::max(end, b.launched_ns)}, b.index});
    t.buckets.push_back({b.index, b.bytes});
  }
  return t;
}

std::vector<StepProfile> CpuRecorder::profiles() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<StepProfile> out;
  out.reserve(done_.size());
  for (const auto& m : done_) out.push_back(profile_step(timeline(m)));
  return out;
}

void CpuRecorder::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  if (open_) ACS_THROW(Error, "reset() called inside a step (call step_end() first)");
  done_.clear();
  unmatched_.store(0);
}

}  // namespace acspeed
