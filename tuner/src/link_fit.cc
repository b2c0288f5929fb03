#include "acspeed/tuner/link_fit.h"

#include <cmath>

namespace acspeed::tuner {
namespace {

// comm_s = wire_bytes x inverse_bandwidth, least squares.
std::optional<double> fit_inverse_bandwidth(const std::vector<LinkSample>& s) {
  double xy = 0, xx = 0;
  for (const auto& p : s) {
    xy += p.wire_bytes * p.comm_s;
    xx += p.wire_bytes * p.wire_bytes;
  }
  if (xx <= 0 || xy <= 0) return std::nullopt;
  return xy / xx;
}

}  // namespace

std::optional<LinkFit> fit_link(const std::vector<LinkSample>& all) {
  std::vector<LinkSample> s;
  for (const auto& p : all) {
    if (p.wire_bytes > 0 && p.comm_s > 0 && p.collectives >= 0 && std::isfinite(p.comm_s)) s.push_back(p);
  }
  if (s.empty()) return std::nullopt;
  // Normal equations of comm = a x collectives + b x bytes (a = latency, b = 1 / bandwidth).
  double cc = 0, cb = 0, bb = 0, cy = 0, by = 0;
  for (const auto& p : s) {
    cc += p.collectives * p.collectives;
    cb += p.collectives * p.wire_bytes;
    bb += p.wire_bytes * p.wire_bytes;
    cy += p.collectives * p.comm_s;
    by += p.wire_bytes * p.comm_s;
  }
  LinkFit fit;
  fit.samples = s.size();
  const double det = cc * bb - cb * cb;
  // Relative to the scale of the terms: a (near) collinear set cannot separate the two.
  bool fitted = false;
  if (cc > 0 && det > 1e-9 * cc * bb) {
    const double a = (cy * bb - cb * by) / det;
    const double b = (cc * by - cb * cy) / det;
    if (a >= 0 && b > 0) {
      fit.latency_s = a;
      fit.bytes_per_s = 1.0 / b;
      fit.latency_fitted = true;
      fitted = true;
    }
  }
  if (!fitted) {
    const auto b = fit_inverse_bandwidth(s);
    if (!b) return std::nullopt;
    fit.bytes_per_s = 1.0 / *b;
  }
  double sq = 0, total = 0;
  for (const auto& p : s) {
    const double r = p.comm_s - fit.time_s(p.collectives, p.wire_bytes);
    sq += r * r;
    total += p.comm_s;
  }
  fit.rms_error_s = std::sqrt(sq / static_cast<double>(s.size()));
  fit.relative_error = fit.rms_error_s / (total / static_cast<double>(s.size()));
  return fit;
}

}  // namespace acspeed::tuner
