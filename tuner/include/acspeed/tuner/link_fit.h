// A latency + bandwidth fit of one link for one kind of collective, from what the probes measured:
// per trial, the number of collectives its buckets issued per step, the bytes they put on the wire
// and the time the step spent communicating (the union of the buckets' communication spans, so
// buckets queued behind each other are not counted twice). The model is
//     comm_s = collectives x latency_s + wire_bytes / bytes_per_s
// fitted by least squares without intercept. The link's rate is not given to it: the bandwidth is
// what the samples show.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace acspeed::tuner {

struct LinkSample {
  double collectives = 0;  // collectives per step on one lane (buckets / lanes)
  double wire_bytes = 0;   // bytes per step on the bottleneck link
  double comm_s = 0;       // communication time per step (s)
};

struct LinkFit {
  double latency_s = 0;    // per collective; 0 when the samples cannot tell it from bandwidth
  double bytes_per_s = 0;  // > 0
  bool latency_fitted = false;  // false: all samples had the same collectives/bytes ratio
  size_t samples = 0;
  double rms_error_s = 0;  // root mean square residual of comm_s
  double relative_error = 0;  // rms_error_s / the samples' mean comm_s: how well the line explains them

  double time_s(double collectives, double wire_bytes) const { return collectives * latency_s + wire_bytes / bytes_per_s; }
};

// nullopt when no sample has wire bytes and time > 0. A fitted latency below 0 (noise) is
// dropped: the bandwidth is then refitted alone.
std::optional<LinkFit> fit_link(const std::vector<LinkSample>& samples);

}  // namespace acspeed::tuner
