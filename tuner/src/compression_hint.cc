#include "compression_hint.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "acspeed/comm_methods.h"
#include "acspeed/tuner/search_space.h"

namespace acspeed::tuner {

std::optional<std::string> compression_hint(const TrialMetrics& m, const GradientLayout& gradients) {
  const auto comm = m.exposed_comm_s ? m.exposed_comm_s : m.comm_s;
  if (!comm || m.p50_s <= 0) return std::nullopt;
  const double share = *comm / m.p50_s;
  if (share < 0.4) return std::nullopt;
  // One compression of each way of sending (the first of the table's rows with that form): the
  // uncompressed one, and what each other would send instead.
  std::vector<const CompressionInfo*> shown;
  for (const auto& c : compressions()) {
    if (std::none_of(shown.begin(), shown.end(), [&](const CompressionInfo* s) { return s->form == c.form; })) {
      shown.push_back(&c);
    }
  }
  auto mib = [&](const CompressionInfo& compression, int rank) {
    CommConfig c;
    c.compression = compression.kind;
    c.powersgd_rank = rank;
    return static_cast<double>(sent_bytes(gradients, c)) / (1 << 20);
  };
  std::vector<std::string> names, options;
  for (const auto* c : shown) {
    names.emplace_back(c->name);
    if (!c->changes_numerics) continue;
    if (gradients.empty()) {
      options.emplace_back(c->name);
      continue;
    }
    const double full = mib(*shown.front(), 1);
    if (c->ranked) {
      const int low = kDefaultPowerSgdRanks.front(), high = kDefaultPowerSgdRanks.back();
      const double at_low = mib(*c, low), at_high = mib(*c, high);
      options.push_back(fmt::format("{} ranks {},{} ({:.2f} / {:.2f} MiB: saves {:.1f} / {:.1f} MiB)", c->name, low,
                                    high, at_low, at_high, full - at_low, full - at_high));
    } else {
      const double sent = mib(*c, 1);
      options.push_back(fmt::format("{} ({:.1f} MiB instead of {:.1f} MiB: saves {:.1f} MiB)", c->name, sent, full,
                                    full - sent));
    }
  }
  return fmt::format(
      "note: communication is {:.0f}% of the step ({} of {}) and compression was not searched: "
      "`--compression {}` would search {} of gradients per step and rank; compression changes "
      "numerics, so the tuner keeps a compressed config only if it passes the convergence guard (gradient "
      "fidelity and the loss trajectory against the uncompressed run)",
      share * 100, format_seconds(*comm), format_seconds(m.p50_s), fmt::join(names, ","),
      fmt::join(options, " and "));
}

}  // namespace acspeed::tuner
