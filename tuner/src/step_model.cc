#include "acspeed/tuner/step_model.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "acspeed/comm_methods.h"
#include "acspeed/error.h"
#include "acspeed/tuner/statistics.h"

namespace acspeed::tuner {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Bytes per node and step on the inter-node link, per byte of payload.
double algorithm_factor(Algorithm algorithm, int world_size, int nnodes) {
  if (info(algorithm).by_node) return nnodes > 1 ? 2.0 * (nnodes - 1) / nnodes : 0.0;
  return world_size > 1 ? 2.0 * (world_size - 1) / world_size : 0.0;
}

// Bytes per node and step on the inter-node link; nullopt for a low-rank compression without the gradients' shapes.
std::optional<double> wire_bytes(const CommConfig& c, int64_t payload, const std::optional<GradientLayout>& gradients,
                                 int world_size, int nnodes) {
  double sent = 0;
  if (info(c.compression).form == WireForm::kLowRank) {
    if (!gradients) return std::nullopt;
    sent = static_cast<double>(sent_bytes(*gradients, c));
  } else {
    const auto fraction = wire_fraction(c.compression);
    if (!fraction) return std::nullopt;
    sent = static_cast<double>(payload) * *fraction;
  }
  return sent * algorithm_factor(c.algorithm, world_size, nnodes);
}

// Collectives a bucket issues, in units of the algorithm's own (what the link fit's latency is per).
int collectives_per_bucket(const CommConfig& c) { return info(c.compression).collectives_per_bucket; }

double collectives(const CommConfig& c, int buckets) {
  return static_cast<double>(buckets) * collectives_per_bucket(c) / c.streams;
}

// K, a compression's own compute per step (PowerSGD's): the config's measured one, else the median of
// measured configs with its compression and rank; 0 for compressions without; nullopt when not measured.
std::optional<double> compression_cost(const StepModel& m, const CommConfig& c) {
  if (!info(c.compression).own_compute) return 0.0;
  const MeasuredConfig* measured = find_measured(m, c);
  if (measured != nullptr && measured->compression_s) return measured->compression_s;
  std::vector<double> same_rank;
  for (const auto& other : m.measured) {
    if (other.compression_s && other.config.compression == c.compression &&
        other.config.powersgd_rank == c.powersgd_rank) {
      same_rank.push_back(*other.compression_s);
    }
  }
  if (same_rank.empty()) return std::nullopt;
  return median(same_rank);
}

// DDP's bucketing, approximately: a first bucket of first_bucket_mb, then buckets of bucket_cap_mb.
int estimated_buckets(const CommConfig& c, int64_t payload) {
  const double first = c.first_bucket_mb.value_or(1.0) * kMiB;
  const double cap = c.bucket_cap_mb.value_or(kDdpDefaultBucketMb) * kMiB;
  const double rest = std::max(0.0, static_cast<double>(payload) - first);
  return 1 + static_cast<int>(std::ceil(rest / cap));
}

std::optional<int> buckets_of(const StepModel& m, const CommConfig& c) {
  const MeasuredConfig* measured = find_measured(m, c);
  if (measured != nullptr && measured->buckets) return measured->buckets;
  // The calibration trial of DDP's defaults counts the same buckets as any config with the same sizes.
  for (const auto& other : m.measured) {
    if (other.buckets && other.config.bucket_cap_mb == c.bucket_cap_mb &&
        other.config.first_bucket_mb == c.first_bucket_mb) {
      return other.buckets;
    }
  }
  return std::nullopt;
}

// F of an untried config: the median CPU floor of measured configs with the same compression and
// algorithm, else the same compression; nullopt when none measured one.
std::optional<double> borrowed_cpu_floor(const StepModel& m, const CommConfig& c) {
  for (const bool same_algorithm : {true, false}) {
    std::vector<double> floors;
    for (const auto& other : m.measured) {
      if (other.cpu_floor_s && other.config.compression == c.compression &&
          (!same_algorithm || other.config.algorithm == c.algorithm)) {
        floors.push_back(*other.cpu_floor_s);
      }
    }
    if (!floors.empty()) return median(floors);
  }
  return std::nullopt;
}

struct BorrowedHead {
  double head_s = 0;
  bool same_compression = false;  // borrowed from configs with the config's compression
};

// The head of an untried config: the median head of measured configs with the same compression and
// algorithm, else the same compression, else all; the serial compute when nothing was measured.
BorrowedHead borrowed_head(const StepModel& m, const CommConfig& c) {
  auto heads = [&](auto&& same) {
    std::vector<double> out;
    for (const auto& other : m.measured) {
      if (other.head_s && same(other.config)) out.push_back(*other.head_s);
    }
    return out;
  };
  int tier = 0;
  for (auto&& values : {heads([&](const CommConfig& o) { return o.compression == c.compression && o.algorithm == c.algorithm; }),
                        heads([&](const CommConfig& o) { return o.compression == c.compression; }),
                        heads([](const CommConfig&) { return true; })}) {
    if (!values.empty()) return {median(values), tier < 2};
    ++tier;
  }
  return {m.serial_s.value_or(0.0), false};
}

}  // namespace

std::optional<double> wire_fraction(Compression compression) {
  const CompressionInfo& c = info(compression);
  switch (c.form) {
    case WireForm::kAsIs: return 1.0;
    case WireForm::kCast: return c.cast_bytes / 4.0;  // of fp32 gradients
    case WireForm::kLowRank: return std::nullopt;     // depends on the matrices' shapes (gradient_layout.h)
  }
  return std::nullopt;
}

int flows_of(const StepModel& model, const CommConfig& config, const Scenario& scenario) {
  const int nnodes = scenario.nnodes > 0 ? scenario.nnodes : model.setup.nnodes;
  const int per_node = scenario.nproc_per_node > 0
                           ? scenario.nproc_per_node
                           : (model.setup.nnodes > 0 ? model.setup.world_size / model.setup.nnodes : 0);
  const int world = scenario.nnodes > 0 || scenario.nproc_per_node > 0 ? nnodes * per_node : model.setup.world_size;
  return flows(config, {world, nnodes, model.setup.groups_per_role});
}

const LinkFit* link_fit_for(const StepModel& model, const CommConfig& config, const Scenario& scenario) {
  const auto link = model.links.find(flows_of(model, config, scenario));
  if (link == model.links.end()) return nullptr;
  const auto fit = link->second.fits.find(config.algorithm);
  return fit != link->second.fits.end() ? &fit->second : &link->second.pooled;
}

bool flow_count_unmeasured(const StepModel& model, const CommConfig& config) {
  return link_fit_for(model, config) == nullptr;
}

bool links_consistent(const StepModel& model) {
  double fewer_flows_rate = 0;  // the highest rate of a smaller flow count (links are ordered by flows)
  for (const auto& [flows, link] : model.links) {
    if (link.pooled.bytes_per_s < (1 - kReliableLinkError) * fewer_flows_rate) return false;
    fewer_flows_rate = std::max(fewer_flows_rate, link.pooled.bytes_per_s);
  }
  return true;
}

const MeasuredConfig* find_measured(const StepModel& model, const CommConfig& config) {
  for (const auto& m : model.measured) {
    if (m.config == config) return &m;
  }
  return nullptr;
}

StepModel calibrate(const std::vector<ModelTrial>& trials, const ModelSetup& setup) {
  StepModel model;
  model.setup = setup;
  std::vector<double> compute, serial;
  for (const auto& t : trials) {
    if (t.role != TrialRole::kCompute || t.metrics.p50_s <= 0) continue;
    compute.push_back(t.metrics.p50_s);
    if (t.metrics.forward_s && t.metrics.optimizer_s) serial.push_back(*t.metrics.forward_s + *t.metrics.optimizer_s);
  }
  if (!compute.empty()) model.compute_s = median(compute);
  if (!serial.empty()) model.serial_s = median(serial);

  for (const auto& t : trials) {
    if (t.metrics.bucket_bytes) model.payload_bytes = std::max(model.payload_bytes.value_or(0), *t.metrics.bucket_bytes);
    if (t.role == TrialRole::kCompute && t.metrics.gradients) model.gradients = t.metrics.gradients;
  }
  // Link samples, per flow count: every trial that ran acspeed's hook under the probe, except those of
  // a compression with compute of its own (PowerSGD's lies inside its communication spans); of a flow
  // count that some trial sending the gradients as they are calibrated, only those (a cast's spans
  // also hold its conversions and, on gloo, its half-precision sums on the CPU: see the header).
  struct Sample {
    int flows;
    Algorithm algorithm;
    bool cast;
    LinkSample sample;
  };
  std::vector<Sample> hooked;
  std::set<int> as_is;  // flow counts some uncast trial calibrated
  for (const auto& t : trials) {
    const auto& m = t.metrics;
    if (t.role == TrialRole::kCompute || info(t.config.compression).own_compute || !m.comm_s || !m.bucket_count ||
        !m.bucket_bytes || *m.bucket_count <= 0) {
      continue;
    }
    const auto wire = wire_bytes(t.config, *m.bucket_bytes, std::nullopt, setup.world_size, setup.nnodes);
    if (!wire || *wire <= 0) continue;
    const bool cast = info(t.config.compression).form != WireForm::kAsIs;
    hooked.push_back({flows_of(model, t.config), t.config.algorithm, cast,
                      {static_cast<double>(*m.bucket_count) / t.config.streams, *wire, *m.comm_s}});
    if (!cast) as_is.insert(hooked.back().flows);
  }
  std::map<int, std::map<Algorithm, std::vector<LinkSample>>> samples;
  std::map<int, std::vector<LinkSample>> all;
  for (const auto& h : hooked) {
    if (h.cast && as_is.count(h.flows) > 0) continue;
    samples[h.flows][h.algorithm].push_back(h.sample);
    all[h.flows].push_back(h.sample);
  }
  for (const auto& [n, list] : all) {
    const auto pooled = fit_link(list);
    if (!pooled) continue;
    FlowLink& link = model.links[n];
    link.pooled = *pooled;
    for (const auto& [algorithm, of_algorithm] : samples[n]) {
      if (auto fit = fit_link(of_algorithm)) link.fits[algorithm] = *fit;
    }
  }

  // Measured configs, in the order first measured.
  for (const auto& t : trials) {
    if (t.role == TrialRole::kCompute) continue;
    auto it = std::find_if(model.measured.begin(), model.measured.end(),
                           [&](const MeasuredConfig& m) { return m.config == t.config; });
    if (it == model.measured.end()) {
      model.measured.push_back({t.config, 0, std::nullopt, std::nullopt, std::nullopt});
      it = model.measured.end() - 1;
    }
    if (t.metrics.bucket_count && *t.metrics.bucket_count > 0) it->buckets = t.metrics.bucket_count;
  }
  for (auto& mc : model.measured) {
    std::vector<double> steps, compression, floors;
    for (const auto& t : trials) {
      if (t.role != TrialRole::kCompute && t.role != TrialRole::kCalibration && t.config == mc.config && t.metrics.p50_s > 0) {
        steps.push_back(t.metrics.p50_s);
        if (t.metrics.compression_s) compression.push_back(*t.metrics.compression_s);
        if (t.metrics.cpu_floor_s) floors.push_back(*t.metrics.cpu_floor_s);
      }
    }
    if (!steps.empty()) mc.step_s = median(steps);
    if (!compression.empty()) mc.compression_s = median(compression);
    // Busy time above the step it was measured in was other work on shared cores, not this config's.
    if (!floors.empty()) mc.cpu_floor_s = std::min(median(floors), mc.step_s);
  }
  // Calibration-only entries (no timed run of their own) stay for their bucket counts.
  for (auto& mc : model.measured) {
    const LinkFit* fit = link_fit_for(model, mc.config);
    if (mc.step_s <= 0 || fit == nullptr || !model.payload_bytes) continue;
    const auto buckets = buckets_of(model, mc.config);
    const auto wire = wire_bytes(mc.config, *model.payload_bytes, model.gradients, setup.world_size, setup.nnodes);
    if (!buckets || !wire) continue;
    mc.comm_s = fit->time_s(collectives(mc.config, *buckets), *wire);
    mc.head_s = std::max(0.0, mc.step_s - *mc.comm_s);
  }
  return model;
}

std::vector<ModelTrial> model_trials(const std::vector<TrialRecord>& records) {
  std::vector<ModelTrial> out;
  for (const auto& r : records) {
    if (r.status != TrialStatus::kOk) continue;
    try {
      out.push_back({r.role, config_from_json(r.config_json), metrics_from_json(r.metrics_json)});
    } catch (const InvalidArgument&) {
      // a trial that does not read as a config and metrics tells the model nothing
    }
  }
  return out;
}

StepModel session_model(const Store& store, const SessionRecord& session) {
  // The workers' backend and device, as the session recorded them (session_record.cc); a session
  // that did not record them ran gloo (before NCCL sessions stored their backend).
  const auto versions = nlohmann::json::parse(session.versions_json, nullptr, false);
  auto text = [&](const char* key) {
    return versions.is_object() && versions.contains(key) && versions[key].is_string() ? versions[key].get<std::string>()
                                                                                       : std::string();
  };
  return calibrate(model_trials(store.trials(session.id)),
                   {static_cast<int>(session.world_size), static_cast<int>(session.nnodes),
                    groups_per_role(text("backend"), text("device"))});
}

Prediction predict(const StepModel& m, const CommConfig& c, const Scenario& scenario) {
  Prediction p;
  const int nnodes = scenario.nnodes > 0 ? scenario.nnodes : m.setup.nnodes;
  const int per_node = scenario.nproc_per_node > 0 ? scenario.nproc_per_node
                                                   : (m.setup.nnodes > 0 ? m.setup.world_size / m.setup.nnodes : 0);
  const int world = nnodes * per_node;
  if (!m.compute_s) {
    p.why_not = "no compute-only trial in this session";
    return p;
  }
  if (m.setup.nnodes < 2) {
    p.why_not = "the session ran on one node: there was no inter-node link to calibrate";
    return p;
  }
  if (nnodes < 2) {
    p.why_not = "one node: the model knows the inter-node link only";
    return p;
  }
  if (!m.payload_bytes) {
    p.why_not = "no trial carries the probe's per-bucket bytes (a session from before the model, or no probe)";
    return p;
  }
  p.flows = flows_of(m, c, scenario);
  const LinkFit* fit = link_fit_for(m, c, scenario);
  if (fit == nullptr) {
    if (m.links.empty()) {
      p.why_not = "no link fit: no trial ran acspeed's hook with the probe";
    } else {
      p.why_not = fmt::format("no link fit for {} flow(s) between two nodes: no trial with that many ran acspeed's "
                              "hook with the probe (a link capped per flow carries more with more flows): measure "
                              "it", p.flows);
    }
    return p;
  }
  const auto wire = wire_bytes(c, *m.payload_bytes, m.gradients, world, nnodes);
  if (!wire) {
    p.why_not = info(c.compression).form == WireForm::kLowRank
                    ? fmt::format("the session's compute-only trial does not carry the gradients' shapes (a session "
                                  "from before {}'s byte model): the bytes {} sends are unknown",
                                  info(c.compression).display_name, to_string(c.compression))
                    : fmt::format("no model of the bytes {} compression sends", to_string(c.compression));
    return p;
  }
  if (scenario.bandwidth_scale <= 0 || !std::isfinite(scenario.bandwidth_scale)) {
    p.why_not = "bandwidth scale must be a positive number";
    return p;
  }
  const int buckets = buckets_of(m, c).value_or(estimated_buckets(c, *m.payload_bytes));
  const double bandwidth = fit->bytes_per_s * scenario.bandwidth_scale;
  const MeasuredConfig* measured = find_measured(m, c);
  const bool head_measured = measured != nullptr && measured->head_s.has_value();
  const double compression = compression_cost(m, c).value_or(0.0);
  double head = 0;
  if (head_measured) {
    head = *measured->head_s;  // holds the config's own PowerSGD compute
  } else {
    const BorrowedHead borrowed = borrowed_head(m, c);
    head = borrowed.head_s + (borrowed.same_compression ? 0.0 : compression);
  }
  const double compute = *m.compute_s;
  const double serial = m.serial_s.value_or(0.0);
  const std::optional<double> floor =
      measured != nullptr && measured->cpu_floor_s ? measured->cpu_floor_s : borrowed_cpu_floor(m, c);
  p.ok = true;
  p.wire_bytes = static_cast<int64_t>(*wire);
  p.wire_s = *wire / bandwidth;
  p.comm_s = collectives(c, buckets) * fit->latency_s + p.wire_s;
  p.compression_s = compression;
  p.bound_s = std::max(compute, serial + p.wire_s) + compression;
  p.cpu_floor_s = floor.value_or(0.0);
  p.step_s = std::max({compute, head + p.comm_s, p.bound_s, p.cpu_floor_s});
  p.head_measured = head_measured;
  p.reliable = fit->relative_error <= kReliableLinkError && links_consistent(m);
  return p;
}

}  // namespace acspeed::tuner
