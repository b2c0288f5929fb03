// The real CuptiApi: the CUDA driver and CUPTI are loaded with dlopen on first use, so a binary that
// contains this file starts on a machine without a GPU driver.
#include "acspeed/cupti_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include <cupti.h>

#include "acspeed/error.h"
#include "acspeed/log.h"

namespace acspeed {
namespace {

constexpr size_t kBufferBytes = size_t(4) << 20;
constexpr size_t kBufferAlign = 8;
// Record layouts (CUpti_ActivityKernel10, Memcpy6, Memset4) are those of the CUPTI 13 series.
constexpr uint32_t kMinCuptiVersion = 130000;

// The one sink CUPTI's buffer callbacks deliver to (CUPTI allows one set of callbacks per process),
// so one DlopenCuptiApi traces at a time.
std::mutex g_sink_mu;
CuptiApi::BufferSink g_sink;

bool tracing_elsewhere() {
  std::lock_guard<std::mutex> lock(g_sink_mu);
  return static_cast<bool>(g_sink);
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  {
    std::lock_guard<std::mutex> lock(g_sink_mu);
    if (g_sink && valid > 0) g_sink(buffer, valid);
  }
  std::free(buffer);
}

void CUPTIAPI ignore_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

class DlopenCuptiApi : public CuptiApi {
 public:
  ~DlopenCuptiApi() override { stop(); }

  std::string unavailable_reason() override {
    std::call_once(checked_, [this] { reason_ = check(); });
    if (reason_.empty() && enabled_.empty() && tracing_elsewhere()) {
      return "another acspeed probe is already tracing with CUPTI in this process (close() it first)";
    }
    return reason_;
  }

  void start(BufferSink sink) override {
    const std::string reason = unavailable_reason();
    if (!reason.empty()) ACS_THROW(Error, "CUPTI probe cannot start: {}", reason);
    {
      std::lock_guard<std::mutex> lock(g_sink_mu);
      g_sink = std::move(sink);
    }
    call("cuptiActivityRegisterCallbacks",
         fn_.register_callbacks(buffer_requested, buffer_completed));
    // CUPTI emits an external correlation record only next to a runtime or driver API record, so
    // both API kinds are on (their records are read and dropped); NCCL launches through either.
    for (auto kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                      CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME,
                      CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION}) {
      call("cuptiActivityEnable", fn_.enable(kind));
      enabled_.push_back(kind);
    }
  }

  void stop() override {
    if (enabled_.empty()) return;
    fn_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (auto kind : enabled_) fn_.disable(kind);
    enabled_.clear();
    std::lock_guard<std::mutex> lock(g_sink_mu);
    g_sink = nullptr;
  }

  void flush() override {
    if (!enabled_.empty()) call("cuptiActivityFlushAll", fn_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  }

  uint64_t timestamp_ns() override {
    uint64_t t = 0;
    call("cuptiGetTimestamp", fn_.timestamp(&t));
    return t;
  }

  void set_thread_external_id(uint64_t id) override {
    thread_local bool pushed = false;
    if (pushed) {
      uint64_t last = 0;
      fn_.pop_external(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, &last);
    }
    pushed = fn_.push_external(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, id) == CUPTI_SUCCESS;
  }

  const CUpti_Activity* next_record(uint8_t* buffer, size_t valid_bytes,
                                    const CUpti_Activity* previous) override {
    CUpti_Activity* record = const_cast<CUpti_Activity*>(previous);
    if (fn_.next_record(buffer, valid_bytes, &record) != CUPTI_SUCCESS) return nullptr;
    return record;
  }

 private:
  struct Functions {
    decltype(&cuptiGetVersion) get_version = nullptr;
    decltype(&cuptiGetResultString) result_string = nullptr;
    decltype(&cuptiSubscribe) subscribe = nullptr;
    decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
    decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
    decltype(&cuptiActivityEnable) enable = nullptr;
    decltype(&cuptiActivityDisable) disable = nullptr;
    decltype(&cuptiActivityFlushAll) flush_all = nullptr;
    decltype(&cuptiGetTimestamp) timestamp = nullptr;
    decltype(&cuptiActivityPushExternalCorrelationId) push_external = nullptr;
    decltype(&cuptiActivityPopExternalCorrelationId) pop_external = nullptr;
    decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  };

  template <typename F>
  static bool resolve(void* lib, const char* name, F* out, std::string* missing) {
    *out = reinterpret_cast<F>(dlsym(lib, name));
    if (*out == nullptr && missing->empty()) *missing = name;
    return *out != nullptr;
  }

  std::string check() {
    // 1. A driver and a device, before CUPTI: without them cuptiActivityEnable fails with
    //    CUPTI_ERROR_UNKNOWN (999), which says nothing.
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (driver == nullptr) return fmt::format("no GPU driver ({})", dlerror());
    using CuInit = int (*)(unsigned int);
    using CuDeviceGetCount = int (*)(int*);
    auto cu_init = reinterpret_cast<CuInit>(dlsym(driver, "cuInit"));
    auto cu_count = reinterpret_cast<CuDeviceGetCount>(dlsym(driver, "cuDeviceGetCount"));
    if (cu_init == nullptr || cu_count == nullptr) return "libcuda.so.1 lacks cuInit/cuDeviceGetCount";
    if (int rc = cu_init(0); rc != 0) return fmt::format("no usable CUDA device (cuInit returned {})", rc);
    int devices = 0;
    if (int rc = cu_count(&devices); rc != 0 || devices == 0) {
      return fmt::format("no CUDA device (cuDeviceGetCount returned {}, {} devices)", rc, devices);
    }

    // 2. CUPTI: the copy already loaded in this process (torch's) if its soname matches, else ours.
    void* lib = nullptr;
    std::string tried;
    for (const char* name : {"libcupti.so.13", "libcupti.so", ACSPEED_CUPTI_LIBRARY}) {
      lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib != nullptr) break;
      tried += fmt::format("{}{}", tried.empty() ? "" : "; ", dlerror());
    }
    if (lib == nullptr) return fmt::format("CUPTI library not found ({})", tried);
    std::string missing;
    resolve(lib, "cuptiGetVersion", &fn_.get_version, &missing);
    resolve(lib, "cuptiGetResultString", &fn_.result_string, &missing);
    resolve(lib, "cuptiSubscribe", &fn_.subscribe, &missing);
    resolve(lib, "cuptiUnsubscribe", &fn_.unsubscribe, &missing);
    resolve(lib, "cuptiActivityRegisterCallbacks", &fn_.register_callbacks, &missing);
    resolve(lib, "cuptiActivityEnable", &fn_.enable, &missing);
    resolve(lib, "cuptiActivityDisable", &fn_.disable, &missing);
    resolve(lib, "cuptiActivityFlushAll", &fn_.flush_all, &missing);
    resolve(lib, "cuptiGetTimestamp", &fn_.timestamp, &missing);
    resolve(lib, "cuptiActivityPushExternalCorrelationId", &fn_.push_external, &missing);
    resolve(lib, "cuptiActivityPopExternalCorrelationId", &fn_.pop_external, &missing);
    resolve(lib, "cuptiActivityGetNextRecord", &fn_.next_record, &missing);
    if (!missing.empty()) return fmt::format("the CUPTI library lacks {}", missing);
    uint32_t version = 0;
    if (fn_.get_version(&version) != CUPTI_SUCCESS || version < kMinCuptiVersion) {
      return fmt::format("CUPTI API version {} is older than {} (the record layouts acspeed was "
                         "built for)", version, kMinCuptiVersion);
    }

    // 3. One subscriber per process: if another tool holds it, tracing would fight it.
    CUpti_SubscriberHandle handle = nullptr;
    const CUptiResult rc = fn_.subscribe(&handle, ignore_callback, nullptr);
    if (rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
      return "another CUPTI subscriber is active in this process (torch.profiler/Kineto, Nsight "
             "Systems?); CUPTI allows one, so the CPU probe measures instead";
    }
    if (rc != CUPTI_SUCCESS) return fmt::format("cuptiSubscribe failed: {}", message(rc));
    fn_.unsubscribe(handle);
    return "";
  }

  std::string message(CUptiResult rc) const {
    const char* text = nullptr;
    if (fn_.result_string != nullptr && fn_.result_string(rc, &text) == CUPTI_SUCCESS && text) {
      return fmt::format("{} ({})", text, int(rc));
    }
    return fmt::format("CUPTI error {}", int(rc));
  }

  void call(const char* what, CUptiResult rc) const {
    if (rc != CUPTI_SUCCESS) ACS_THROW(Error, "{} failed: {}", what, message(rc));
  }

  std::once_flag checked_;
  std::string reason_;
  Functions fn_;
  std::vector<CUpti_ActivityKind> enabled_;
};

}  // namespace

std::unique_ptr<CuptiApi> make_cupti_api() { return std::make_unique<DlopenCuptiApi>(); }

}  // namespace acspeed
