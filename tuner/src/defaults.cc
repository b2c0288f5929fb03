#include "acspeed/tuner/defaults.h"

namespace acspeed::tuner {

const TuneDefaults& tune_defaults(bool gpu) {
  //                                 nproc batch image warmup steps repeats budget buckets         streams
  static const TuneDefaults kGpu = {0,    32,   224,  5,     20,   5,      0,     {1, 5, 25, 100}, {1, 2, 4}};
  static const TuneDefaults kCpu = {2,    8,    64,   2,     6,    3,      10,    {5, 25},         {1, 2}};
  return gpu ? kGpu : kCpu;
}

}  // namespace acspeed::tuner
