// The CUPTI backend on synthetic activity buffers: a fake CuptiApi plays CUPTI's part (record
// buffers, external correlation tags per thread, the clock) so no GPU is needed.
#include "acspeed/cupti_recorder.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <thread>

#include "acspeed/error.h"

namespace acspeed {
namespace {

// Records laid out back to back, each after an 8-byte size header.
class SyntheticBuffer {
 public:
  template <typename Record>
  void add(const Record& r) {
    const uint64_t size = sizeof(Record);
    const size_t at = bytes_.size();
    bytes_.resize(at + sizeof(size) + size);
    std::memcpy(bytes_.data() + at, &size, sizeof(size));
    std::memcpy(bytes_.data() + at + sizeof(size), &r, size);
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

class FakeCuptiApi : public CuptiApi {
 public:
  std::string reason;         // what unavailable_reason() answers
  uint64_t clock = 0;         // what timestamp_ns() answers
  std::vector<SyntheticBuffer> pending;  // delivered on flush()
  bool started = false;
  std::shared_ptr<bool> stopped = std::make_shared<bool>(false);  // outlives the fake

  std::string unavailable_reason() override { return reason; }
  void start(BufferSink s) override {
    sink = std::move(s);
    started = true;
  }
  void stop() override { *stopped = true; }
  void flush() override {
    for (auto& b : pending) sink(b.bytes().data(), b.bytes().size());
    pending.clear();
  }
  uint64_t timestamp_ns() override { return clock; }
  void set_thread_external_id(uint64_t id) override { tags[std::this_thread::get_id()] = id; }
  const CUpti_Activity* next_record(uint8_t* buffer, size_t valid, const CUpti_Activity* prev) override {
    size_t at = 0;
    if (prev != nullptr) {
      const size_t prev_at = size_t(reinterpret_cast<const uint8_t*>(prev) - buffer) - 8;
      uint64_t size = 0;
      std::memcpy(&size, buffer + prev_at, sizeof(size));
      at = prev_at + 8 + size;
    }
    if (at + 8 > valid) return nullptr;
    return reinterpret_cast<const CUpti_Activity*>(buffer + at + 8);
  }

  // What CUPTI would record for a kernel launched by this thread: its external correlation (if the
  // thread is tagged) and the kernel itself.
  void kernel(const char* name, uint64_t start, uint64_t end) {
    const uint32_t correlation = next_correlation_++;
    SyntheticBuffer& b = buffer();
    auto tag = tags.find(std::this_thread::get_id());
    if (tag != tags.end()) {
      CUpti_ActivityExternalCorrelation e{};
      e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
      e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1;
      e.externalId = tag->second;
      e.correlationId = correlation;
      b.add(e);
    }
    CUpti_ActivityKernel10 k{};
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = start;
    k.end = end;
    k.correlationId = correlation;
    k.name = name;
    b.add(k);
  }
  void memcpy(uint64_t start, uint64_t end) {
    CUpti_ActivityMemcpy6 m{};
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.start = start;
    m.end = end;
    m.correlationId = next_correlation_++;
    buffer().add(m);
  }
  void memset(uint64_t start, uint64_t end) {
    CUpti_ActivityMemset4 m{};
    m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    m.start = start;
    m.end = end;
    m.correlationId = next_correlation_++;
    buffer().add(m);
  }
  // Starts a new buffer, as CUPTI does when one fills up.
  void next_buffer() { pending.emplace_back(); }

 private:
  SyntheticBuffer& buffer() {
    if (pending.empty()) pending.emplace_back();
    return pending.back();
  }
  BufferSink sink;
  std::map<std::thread::id, uint64_t> tags;
  uint32_t next_correlation_ = 1;
};

constexpr const char* kGemm = "_Z13sgemm_kernelPfS_";
constexpr const char* kAllReduce =
    "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE";

struct Fixture {
  FakeCuptiApi* api;
  CuptiRecorder rec;
  Fixture() : api(new FakeCuptiApi), rec(std::unique_ptr<CuptiApi>(api)) {}
};

TEST(CuptiRecorder, StepsSeparateComputeFromNcclKernelsAndFindExposedCommunication) {
  Fixture f;
  ProbeOptions cuda;
  cuda.device = "cuda";
  std::string why;
  ASSERT_TRUE(f.rec.enabled(cuda, &why)) << why;
  f.rec.start();
  EXPECT_TRUE(f.api->started);

  f.api->clock = 1000;
  f.rec.step_begin();
  f.api->kernel(kGemm, 1100, 1500);  // forward + backward of the last layers
  f.rec.bucket_launched(1, 4 << 20);
  f.api->kernel(kAllReduce, 1450, 1700);  // bucket 1, overlaps compute until 1500
  f.api->kernel(kGemm, 1500, 1600);      // rest of backward (launched after the tag: still compute)
  f.rec.bucket_launched(0, 2 << 20);
  f.api->kernel(kAllReduce, 1700, 1900);  // bucket 0, fully exposed
  f.api->next_buffer();
  f.api->memcpy(1900, 1950);  // copy-back: compute side
  f.api->memset(1950, 1960);
  f.rec.backward_end();
  f.api->clock = 2000;
  f.rec.step_end();

  const auto profiles = f.rec.profiles();
  ASSERT_EQ(profiles.size(), 1u);
  const StepProfile& p = profiles[0];
  EXPECT_EQ(p.wall_ns, 1000);
  EXPECT_EQ(p.compute_ns, 500 + 60);  // [1100, 1600) + [1900, 1960)
  EXPECT_EQ(p.comm_ns, 450);          // [1450, 1900)
  EXPECT_EQ(p.exposed_comm_ns, 300);  // [1600, 1900)
  EXPECT_DOUBLE_EQ(p.overlap_ratio, 150.0 / 450.0);
  ASSERT_EQ(p.buckets.size(), 2u);
  EXPECT_EQ(p.buckets[0].index, 0);
  EXPECT_EQ(p.buckets[0].bytes, 2 << 20);
  EXPECT_EQ(p.buckets[0].comm_ns, 200);
  EXPECT_EQ(p.buckets[1].comm_ns, 250);
  EXPECT_TRUE(f.rec.warnings().empty());
}

TEST(CuptiRecorder, ATagLeftFromAnEarlierStepDoesNotAttributeANcclKernelToABucket) {
  Fixture f;
  f.rec.start();
  f.api->clock = 0;
  f.rec.step_begin();
  f.rec.bucket_launched(0, 100);
  f.api->kernel(kAllReduce, 10, 20);
  f.api->clock = 100;
  f.rec.step_end();
  f.rec.step_begin();
  f.api->kernel(kAllReduce, 110, 130);  // e.g. a broadcast before this step's first bucket
  f.api->clock = 200;
  f.rec.step_end();

  const auto profiles = f.rec.profiles();
  ASSERT_EQ(profiles.size(), 2u);
  EXPECT_EQ(profiles[0].buckets.at(0).comm_ns, 10);
  EXPECT_EQ(profiles[1].comm_ns, 20);
  EXPECT_TRUE(profiles[1].buckets.empty());
}

TEST(CuptiRecorder, KernelsAreClippedToTheStepWindowThatContainsThem) {
  Fixture f;
  f.rec.start();
  f.api->kernel(kGemm, 0, 50);  // before any step
  f.api->clock = 100;
  f.rec.step_begin();
  f.api->kernel(kGemm, 90, 150);
  f.api->clock = 200;
  f.rec.step_end();
  EXPECT_EQ(f.rec.profiles().at(0).compute_ns, 50);
}

TEST(CuptiRecorder, NoRecordsAtAllIsReportedAsAWarning) {
  Fixture f;
  f.rec.start();
  f.rec.step_begin();
  f.api->clock = 10;
  f.rec.step_end();
  EXPECT_EQ(f.rec.profiles().at(0).compute_ns, 0);
  ASSERT_EQ(f.rec.warnings().size(), 1u);
  EXPECT_NE(f.rec.warnings()[0].find("no activity records"), std::string::npos);
}

TEST(CuptiRecorder, DisabledForCpuModelsTorchProfilerAndWhateverCuptiSays) {
  Fixture f;
  std::string why;
  ProbeOptions cpu;
  EXPECT_FALSE(f.rec.enabled(cpu, &why));
  EXPECT_NE(why.find("not on a CUDA device"), std::string::npos) << why;
  ProbeOptions profiled;
  profiled.device = "cuda";
  profiled.external_profiler_active = true;
  EXPECT_FALSE(f.rec.enabled(profiled, &why));
  EXPECT_NE(why.find("torch.profiler"), std::string::npos) << why;
  ProbeOptions cuda;
  cuda.device = "cuda";
  f.api->reason = "no GPU driver (libcuda.so.1: not found)";
  EXPECT_FALSE(f.rec.enabled(cuda, &why));
  EXPECT_EQ(why, f.api->reason);
}

TEST(CuptiRecorder, StopsTracingWhenDestroyedAndResetDropsRecords) {
  auto* api = new FakeCuptiApi;
  const std::shared_ptr<bool> stopped = api->stopped;
  {
    CuptiRecorder rec{std::unique_ptr<CuptiApi>(api)};
    rec.start();
    rec.step_begin();
    api->kernel(kGemm, 0, 5);
    api->clock = 10;
    rec.step_end();
    rec.reset();
    EXPECT_TRUE(rec.profiles().empty());
    EXPECT_FALSE(*stopped);
    rec.step_begin();
    EXPECT_THROW(rec.step_begin(), Error);
    EXPECT_THROW(rec.reset(), Error);
    rec.step_end();
    EXPECT_EQ(rec.profiles().at(0).compute_ns, 0);  // the first step's kernel was dropped
  }
  EXPECT_TRUE(*stopped);
}

}  // namespace
}  // namespace acspeed
