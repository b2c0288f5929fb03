// Interval arithmetic on time spans (nanoseconds): union, intersection, difference and coverage.
// The step profile (step_profile.h) is computed from these; both probe backends share it.
#pragma once

#include <cstdint>
#include <vector>

namespace acspeed {

// A half-open time span [begin_ns, end_ns). An empty span has begin_ns == end_ns.
struct Interval {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;

  int64_t length() const { return end_ns - begin_ns; }
  bool operator==(const Interval& other) const {
    return begin_ns == other.begin_ns && end_ns == other.end_ns;
  }
};

// A normalized set of spans: sorted by begin, pairwise disjoint and non-adjacent, none empty.
// Every function below returns a normalized set and accepts only normalized sets (make one with
// unite()).
using IntervalSet = std::vector<Interval>;

// The union of arbitrary spans, normalized. Throws InvalidArgument for a span with end < begin.
IntervalSet unite(std::vector<Interval> spans);
// Spans covered by both a and b.
IntervalSet intersect(const IntervalSet& a, const IntervalSet& b);
// Spans of a not covered by b.
IntervalSet subtract(const IntervalSet& a, const IntervalSet& b);
// a restricted to window.
IntervalSet clip(const IntervalSet& a, Interval window);
// Total time covered by a.
int64_t total_length(const IntervalSet& a);
// Time of a that b also covers (= total_length(intersect(a, b))).
int64_t coverage(const IntervalSet& a, const IntervalSet& b);

}  // namespace acspeed
