#include "acspeed/tuner/defaults.h"

#include <fmt/format.h>

#include "acspeed/tuner/session.h"

namespace acspeed::tuner {

const TuneDefaults& tune_defaults(bool gpu) {
  //                                 nproc batch image warmup steps repeats budget buckets         streams
  static const TuneDefaults kGpu = {0,    32,   224,  5,     20,   5,      0,     {1, 5, 25, 100}, {1, 2, 4}};
  static const TuneDefaults kCpu = {2,    8,    64,   2,     6,    3,      10,    {5, 25},         {1, 2}};
  return gpu ? kGpu : kCpu;
}

uint64_t default_seed(const TuneOptions& o) {
  const std::string job = fmt::format("{}|{}|{}|{}|{}|{}|{}|{}", o.model, o.data, to_string(o.precision), o.batch_size,
                                      o.image_size, o.nnodes, o.nproc_per_node, o.trajectory_steps);
  uint64_t hash = 14695981039346656037ull;  // FNV-1a, 64 bits: the same on every platform and build
  for (const unsigned char c : job) {
    hash = (hash ^ c) * 1099511628211ull;
  }
  return (hash ^ (hash >> 32)) & 0x7fffffffu;
}

}  // namespace acspeed::tuner
