#include "compression_hint.h"

#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace acspeed::tuner {

std::optional<std::string> compression_hint(const TrialMetrics& m, const GradientLayout& gradients) {
  const auto comm = m.exposed_comm_s ? m.exposed_comm_s : m.comm_s;
  if (!comm || m.p50_s <= 0) return std::nullopt;
  const double share = *comm / m.p50_s;
  if (share < 0.4) return std::nullopt;
  std::vector<std::string> options;
  if (!gradients.empty()) {
    auto mib = [&](Compression compression, int rank) {
      CommConfig c;
      c.compression = compression;
      c.powersgd_rank = rank;
      return static_cast<double>(sent_bytes(gradients, c)) / (1 << 20);
    };
    const double full = mib(Compression::kNone, 1), fp16 = mib(Compression::kFp16, 1);
    const double rank1 = mib(Compression::kPowerSgd, 1), rank4 = mib(Compression::kPowerSgd, 4);
    options.push_back(fmt::format("fp16 ({:.1f} MiB instead of {:.1f} MiB: saves {:.1f} MiB)", fp16, full,
                                  full - fp16));
    options.push_back(fmt::format("powersgd ranks 1,4 ({:.2f} / {:.2f} MiB: saves {:.1f} / {:.1f} MiB)", rank1,
                                  rank4, full - rank1, full - rank4));
  }
  return fmt::format(
      "note: communication is {:.0f}% of the step ({} of {}) and compression was not searched: "
      "`--compression none,fp16,powersgd` would search {} of gradients per step and rank; compression changes "
      "numerics, so the tuner keeps a compressed config only if it passes the convergence guard (gradient "
      "fidelity and the loss trajectory against the uncompressed run)",
      share * 100, format_seconds(*comm), format_seconds(m.p50_s),
      options.empty() ? std::string("fp16 and powersgd") : fmt::format("{}", fmt::join(options, " and ")));
}

}  // namespace acspeed::tuner
