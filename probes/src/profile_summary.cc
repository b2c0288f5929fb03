#include "acspeed/profile_summary.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "acspeed/error.h"

namespace acspeed {

double percentile(std::vector<double> values, double q) {
  if (values.empty()) ACS_THROW(InvalidArgument, "percentile of an empty set of values");
  if (!(q >= 0.0 && q <= 100.0)) {
    ACS_THROW(InvalidArgument, "percentile {} is outside [0, 100]", q);
  }
  std::sort(values.begin(), values.end());
  const double position = q / 100.0 * double(values.size() - 1);
  const size_t lower = size_t(std::floor(position));
  const size_t upper = std::min(lower + 1, values.size() - 1);
  const double fraction = position - double(lower);
  return values[lower] + (values[upper] - values[lower]) * fraction;
}

ProfileSummary summarize(const std::vector<StepProfile>& steps, const SummaryOptions& options) {
  if (steps.empty()) ACS_THROW(InvalidArgument, "no steps to summarize: mark at least one step");
  ProfileSummary out;
  out.steps = int64_t(steps.size());
  out.ranks = options.ranks;
  out.backend = options.backend;

  std::vector<double> wall, compute, comm, exposed, overlap;
  std::map<int, std::vector<double>> bucket_times;
  std::map<int, int64_t> bucket_bytes;
  for (const auto& s : steps) {
    wall.push_back(double(s.wall_ns) * 1e-9);
    compute.push_back(double(s.compute_ns) * 1e-9);
    comm.push_back(double(s.comm_ns) * 1e-9);
    exposed.push_back(double(s.exposed_comm_ns) * 1e-9);
    overlap.push_back(s.overlap_ratio);
    for (const auto& b : s.buckets) {
      bucket_times[b.index].push_back(double(b.comm_ns) * 1e-9);
      bucket_bytes[b.index] = std::max(bucket_bytes[b.index], b.bytes);
    }
  }
  for (double q : options.percentiles) {
    out.rows.push_back({q, percentile(wall, q), percentile(compute, q), percentile(comm, q),
                        percentile(exposed, q), percentile(overlap, q)});
  }
  for (const auto& [index, times] : bucket_times) {
    out.buckets.push_back({index, bucket_bytes[index], percentile(times, 50), int64_t(times.size())});
  }
  return out;
}

std::string format_summary(const ProfileSummary& summary) {
  std::string out = fmt::format(
      "probe: {}, {} rank{}, {} steps (per step: max over ranks; overlap: min over ranks)\n",
      summary.backend.empty() ? "?" : summary.backend, summary.ranks, summary.ranks == 1 ? "" : "s",
      summary.steps);
  out += fmt::format("{:>5} {:>10} {:>12} {:>10} {:>12} {:>13} {:>8}\n", "pct", "wall(ms)",
                     "compute(ms)", "comm(ms)", "exposed(ms)", "exposed/wall", "overlap");
  for (const auto& r : summary.rows) {
    const double share = r.wall_s > 0 ? r.exposed_comm_s / r.wall_s : 0.0;
    out += fmt::format("{:>5} {:>10.3f} {:>12.3f} {:>10.3f} {:>12.3f} {:>12.1f}% {:>7.1f}%\n",
                       fmt::format("p{:g}", r.percentile), r.wall_s * 1e3, r.compute_s * 1e3,
                       r.comm_s * 1e3, r.exposed_comm_s * 1e3, share * 100.0,
                       r.overlap_ratio * 100.0);
  }
  if (!summary.buckets.empty()) {
    out += fmt::format("{:>6} {:>11} {:>14} {:>6}\n", "bucket", "size(MiB)", "comm p50(ms)",
                       "steps");
    for (const auto& b : summary.buckets) {
      out += fmt::format("{:>6} {:>11.2f} {:>14.3f} {:>6}\n", b.index,
                         double(b.bytes) / (1024.0 * 1024.0), b.comm_s_p50 * 1e3, b.steps);
    }
  }
  return out;
}

}  // namespace acspeed
