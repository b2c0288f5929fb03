// Error model of the C++ layers (runtime, db, probes, tuner): exceptions that carry the offending
// values. C boundaries (the NCCL plugin, the Python module) translate these into status codes or
// Python exceptions; none crosses them.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace acspeed {

// Anything acspeed refuses or fails to do.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad input from the user: an option, an environment variable, a config file. The message names
// the value and what is accepted.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// The store cannot be used for what was asked (corrupt, newer schema, read-only, network FS).
class StoreError : public Error {
 public:
  using Error::Error;
};

}  // namespace acspeed

#define ACS_THROW(ExcType, ...) throw ExcType(fmt::format(__VA_ARGS__))

#define ACS_ENFORCE(cond, ...)                                                       \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      throw ::acspeed::Error(fmt::format("enforce failed: {}: {}", #cond,           \
                                         fmt::format(__VA_ARGS__)));                 \
    }                                                                                \
  } while (0)

// Prints both operands when they differ (gloo's GLOO_ENFORCE_EQ).
#define ACS_ENFORCE_EQ(a, b, ...)                                                    \
  do {                                                                               \
    const auto& acs_a_ = (a);                                                        \
    const auto& acs_b_ = (b);                                                        \
    if (!(acs_a_ == acs_b_)) {                                                       \
      throw ::acspeed::Error(fmt::format("enforce failed: {} == {} ({} vs {}): {}", \
                                         #a, #b, acs_a_, acs_b_,                     \
                                         fmt::format(__VA_ARGS__)));                 \
    }                                                                                \
  } while (0)
