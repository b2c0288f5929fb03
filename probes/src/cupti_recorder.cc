#include "acspeed/cupti_recorder.h"

#include <algorithm>

#include "acspeed/error.h"
#include "acspeed/kernel_class.h"
#include "acspeed/log.h"

namespace acspeed {
namespace {

constexpr int kBucketBits = 24;
constexpr uint64_t kBucketMask = (uint64_t(1) << kBucketBits) - 1;

}  // namespace

CuptiRecorder::CuptiRecorder(std::unique_ptr<CuptiApi> api) : api_(std::move(api)) {}

CuptiRecorder::~CuptiRecorder() {
  if (started_) api_->stop();
}

uint64_t CuptiRecorder::external_id(int64_t step, int bucket) {
  // 0 means "no tag" to CUPTI users, so steps are stored off by one.
  return (uint64_t(step + 1) << kBucketBits) | (uint64_t(bucket) & kBucketMask);
}

bool CuptiRecorder::enabled(const ProbeOptions& options, std::string* why_not) {
  if (options.device != "cuda") {
    *why_not = fmt::format("the model is on '{}', not on a CUDA device", options.device);
    return false;
  }
  if (options.external_profiler_active) {
    *why_not =
        "torch.profiler is active in this process and CUPTI allows one client per process; "
        "the CPU probe measures instead";
    return false;
  }
  const std::string reason = api_->unavailable_reason();
  if (!reason.empty()) {
    *why_not = reason;
    return false;
  }
  return true;
}

void CuptiRecorder::start() {
  api_->start([this](uint8_t* buffer, size_t valid_bytes) { consume(buffer, valid_bytes); });
  started_ = true;
}

void CuptiRecorder::consume(uint8_t* buffer, size_t valid_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const CUpti_Activity* r = api_->next_record(buffer, valid_bytes, nullptr); r != nullptr;
       r = api_->next_record(buffer, valid_bytes, r)) {
    ++records_;
    switch (r->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
        const bool nccl =
            k->name != nullptr && classify_kernel(k->name) == KernelClass::kCommunication;
        spans_.push_back({{int64_t(k->start), int64_t(k->end)}, k->correlationId, nccl});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(r);
        spans_.push_back({{int64_t(m->start), int64_t(m->end)}, m->correlationId, false});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(r);
        spans_.push_back({{int64_t(m->start), int64_t(m->end)}, m->correlationId, false});
        break;
      }
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(r);
        if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1) {
          bucket_tags_[e->correlationId] = e->externalId;
        }
        break;
      }
      default:
        break;
    }
  }
}

void CuptiRecorder::step_begin() {
  const int64_t now = int64_t(api_->timestamp_ns());
  std::lock_guard<std::mutex> lock(mu_);
  if (open_) ACS_THROW(Error, "step_begin() called again before step_end() (step {})", done_.size());
  open_ = true;
  current_ = StepMarks{};
  current_.id = next_step_id_++;
  current_.begin_ns = now;
}

void CuptiRecorder::bucket_launched(int index, int64_t bytes) {
  int64_t step = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!open_) {
      ++unmatched_;
      return;
    }
    step = current_.id;
    current_.buckets.push_back({index, bytes});
  }
  api_->set_thread_external_id(external_id(step, index));
}

void CuptiRecorder::backward_end() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!open_) ACS_THROW(Error, "backward_end() called outside a step (call step_begin() first)");
}

void CuptiRecorder::step_end() {
  const int64_t now = int64_t(api_->timestamp_ns());
  std::lock_guard<std::mutex> lock(mu_);
  if (!open_) ACS_THROW(Error, "step_end() called without step_begin()");
  current_.end_ns = now;
  done_.push_back(std::move(current_));
  current_ = StepMarks{};
  open_ = false;
}

StepTimeline CuptiRecorder::timeline(const StepMarks& m) const {
  StepTimeline t;
  t.window = {m.begin_ns, m.end_ns};
  t.buckets = m.buckets;
  for (const auto& d : spans_) {
    if (d.span.end_ns <= m.begin_ns || d.span.begin_ns >= m.end_ns) continue;
    if (!d.communication) {
      t.compute.push_back(d.span);
      continue;
    }
    int bucket = -1;
    const auto tag = bucket_tags_.find(d.correlation_id);
    if (tag != bucket_tags_.end() && int64_t(tag->second >> kBucketBits) - 1 == m.id) {
      bucket = int(tag->second & kBucketMask);
    }
    t.comm.push_back({d.span, bucket});
  }
  return t;
}

std::vector<StepProfile> CuptiRecorder::profiles() {
  if (started_) api_->flush();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<StepProfile> out;
  out.reserve(done_.size());
  for (const auto& m : done_) out.push_back(profile_step(timeline(m)));
  return out;
}

void CuptiRecorder::reset() {
  if (started_) api_->flush();
  std::lock_guard<std::mutex> lock(mu_);
  if (open_) ACS_THROW(Error, "reset() called inside a step (call step_end() first)");
  done_.clear();
  spans_.clear();
  bucket_tags_.clear();
  records_ = 0;
  unmatched_ = 0;
}

int64_t CuptiRecorder::unmatched_events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unmatched_;
}

std::vector<std::string> CuptiRecorder::warnings() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  if (!done_.empty() && records_ == 0) {
    out.push_back(fmt::format(
        "CUPTI delivered no activity records for {} steps: another CUPTI client (torch.profiler, "
        "Nsight) may have taken over the activity buffers; compute and communication read 0",
        done_.size()));
  }
  return out;
}

}  // namespace acspeed
