// Every CUPTI call acspeed makes goes through this one class, so tests can replace CUPTI with
// synthetic activity buffers (the shape of Kineto's CuptiActivityApi). The real implementation
// (make_cupti_api) loads the CUDA driver and CUPTI with dlopen: binaries that contain it start on
// machines without a GPU driver, and only the CUPTI backend's enabled() touches them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <cupti_activity.h>

namespace acspeed {

class CuptiApi {
 public:
  // Receives each completed activity buffer (valid_bytes of records). Called on CUPTI's thread.
  using BufferSink = std::function<void(uint8_t* buffer, size_t valid_bytes)>;

  virtual ~CuptiApi() = default;
  // "" when CUPTI can trace here, else why not, checked in this order: no GPU driver, no device,
  // CUPTI library missing or too old, another CUPTI subscriber active in this process.
  virtual std::string unavailable_reason() = 0;
  // Registers the buffer callbacks and enables kernel (concurrent), memcpy, memset, runtime and
  // driver API (CUPTI attaches external correlation records to those) and external correlation
  // records. Throws acspeed::Error with CUPTI's message on failure.
  virtual void start(BufferSink sink) = 0;
  // Flushes and disables tracing. Never throws.
  virtual void stop() = 0;
  // Hands every buffered record to the sink now.
  virtual void flush() = 0;
  // CUPTI's clock (ns), the time base of the activity records.
  virtual uint64_t timestamp_ns() = 0;
  // Tags the CUDA work this thread launches from now on with id (external correlation kind
  // CUSTOM1), replacing this thread's previous tag.
  virtual void set_thread_external_id(uint64_t id) = 0;
  // The record after previous (nullptr = the first), or nullptr at the buffer's end.
  virtual const CUpti_Activity* next_record(uint8_t* buffer, size_t valid_bytes,
                                            const CUpti_Activity* previous) = 0;
};

// The real CUPTI, loaded on first use.
std::unique_ptr<CuptiApi> make_cupti_api();

}  // namespace acspeed
