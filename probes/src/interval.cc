#include "acspeed/interval.h"

#include <algorithm>

#include "acspeed/error.h"

namespace acspeed {

IntervalSet unite(std::vector<Interval> spans) {
  for (const auto& span : spans) {
    if (span.end_ns < span.begin_ns) {
      ACS_THROW(InvalidArgument, "interval [{}, {}) ends before it begins", span.begin_ns,
                span.end_ns);
    }
  }
  std::sort(spans.begin(), spans.end(),
            [](const Interval& x, const Interval& y) { return x.begin_ns < y.begin_ns; });
  IntervalSet out;
  for (const auto& span : spans) {
    if (span.length() == 0) continue;
    if (!out.empty() && span.begin_ns <= out.back().end_ns) {
      out.back().end_ns = std::max(out.back().end_ns, span.end_ns);
    } else {
      out.push_back(span);
    }
  }
  return out;
}

IntervalSet intersect(const IntervalSet& a, const IntervalSet& b) {
  IntervalSet out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t begin = std::max(a[i].begin_ns, b[j].begin_ns);
    const int64_t end = std::min(a[i].end_ns, b[j].end_ns);
    if (begin < end) out.push_back({begin, end});
    // Advance whichever span ends first; the other may still overlap the next one.
    if (a[i].end_ns < b[j].end_ns) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

IntervalSet subtract(const IntervalSet& a, const IntervalSet& b) {
  IntervalSet out;
  size_t j = 0;
  for (const auto& span : a) {
    int64_t cursor = span.begin_ns;
    while (j < b.size() && b[j].end_ns <= cursor) ++j;
    size_t k = j;
    while (k < b.size() && b[k].begin_ns < span.end_ns) {
      if (b[k].begin_ns > cursor) out.push_back({cursor, b[k].begin_ns});
      cursor = std::max(cursor, b[k].end_ns);
      ++k;
    }
    if (cursor < span.end_ns) out.push_back({cursor, span.end_ns});
  }
  return out;
}

IntervalSet clip(const IntervalSet& a, Interval window) {
  if (window.length() < 0) {
    ACS_THROW(InvalidArgument, "window [{}, {}) ends before it begins", window.begin_ns,
              window.end_ns);
  }
  if (window.length() == 0) return {};
  return intersect(a, IntervalSet{window});
}

int64_t total_length(const IntervalSet& a) {
  int64_t total = 0;
  for (const auto& span : a) total += span.length();
  return total;
}

int64_t coverage(const IntervalSet& a, const IntervalSet& b) {
  return total_length(intersect(a, b));
}

}  // namespace acspeed
