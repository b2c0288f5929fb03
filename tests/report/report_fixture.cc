#include "report_fixture.h"

#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

namespace acspeed::testing {
namespace {

using json = nlohmann::json;

constexpr int64_t kBatch = 32;
constexpr int64_t kWorld = 2;
constexpr int kSteps = 20;

// Median step time of a config in the synthetic cost model: 100 ms of compute plus exposed
// communication that is lowest for 5 MiB buckets, reduce_scatter and 2 streams.
struct Cost {
  double compute_s;
  double comm_s;
  double exposed_s;
};

Cost cost_of(const CommConfig& c) {
  const double bucket = c.bucket_cap_mb.value_or(25.0);
  const double bucket_penalty = 1.0 + 0.25 * std::abs(std::log2(bucket / 5.0));
  const double algorithm_factor = c.algorithm == Algorithm::kReduceScatter ? 0.85 : 1.0;
  const double stream_factor = c.streams == 2 ? 0.8 : 1.0;
  const double comm = 0.060 * algorithm_factor;
  const double exposed = 0.030 * bucket_penalty * algorithm_factor * stream_factor;
  return {0.100, comm, exposed};
}

std::vector<double> steps(const Cost& cost, std::mt19937& rng) {
  std::normal_distribution<double> noise(1.0, 0.03);
  std::vector<double> out;
  for (int i = 0; i < kSteps; ++i) out.push_back((cost.compute_s + cost.exposed_s) * std::max(0.8, noise(rng)));
  return out;
}

TrialRecord trial(int64_t session, int64_t& ordinal, const std::string& role, const CommConfig& config) {
  TrialRecord t;
  t.session_id = session;
  t.ordinal = ordinal++;
  t.role = role;
  t.config_json = config_to_json(config);
  return t;
}

}  // namespace

int64_t add_sample_session(Store& store, const SampleSessionOptions& options) {
  std::mt19937 rng(options.seed);
  SessionRecord s;
  s.instance_type = options.instance_type;
  s.model_name = options.model_name;
  s.model_signature = "sig-3f2a9c";
  s.precision = "fp32";
  s.world_size = kWorld;
  s.nnodes = 1;
  s.batch_size = kBatch;
  s.strategy = "grid";
  s.seed = options.seed;
  s.search_space_json = json{{"bucket_mb", {1, 5, 25, 100}},
                             {"algorithms", {"allreduce", "reduce_scatter"}},
                             {"streams", {1, 2}},
                             {"compression", {"none"}}}
                            .dump();
  s.options_json = json{{"warmup", 3}, {"steps", kSteps}, {"repeats", 3}}.dump();
  s.versions_json = json{{"torch", "2.15.0"}, {"nccl", nullptr}, {"cuda", nullptr}, {"acspeed", "0.1.0"},
                         {"python", "3.11.9"}}
                        .dump();
  const int64_t id = store.create_session(s);
  int64_t ordinal = 0;

  auto add_measured = [&](const std::string& role, const CommConfig& config, bool metrics) {
    TrialRecord t = trial(id, ordinal, role, config);
    const Cost cost = cost_of(config);
    t.step_times_s = steps(cost, rng);
    if (metrics) {
      t.metrics_json = json{{"compute_s", cost.compute_s}, {"comm_s", cost.comm_s},
                            {"exposed_comm_s", cost.exposed_s}, {"loss", 6.9 - 0.01 * static_cast<double>(t.ordinal)}}
                           .dump();
    }
    store.add_trial(t);
  };

  add_measured("search", CommConfig{}, options.with_metrics);
  for (const auto algorithm : {Algorithm::kAllreduce, Algorithm::kReduceScatter}) {
    for (const int streams : {1, 2}) {
      for (const double bucket : {1.0, 5.0, 25.0, 100.0}) {
        CommConfig c;
        c.bucket_cap_mb = bucket;
        c.algorithm = algorithm;
        c.streams = streams;
        add_measured("search", c, options.with_metrics);
      }
    }
  }
  CommConfig broken;
  broken.bucket_cap_mb = 200;
  broken.streams = 4;
  TrialRecord failed = trial(id, ordinal, "search", broken);
  failed.status = "failed";
  failed.error = options.error_text;
  store.add_trial(failed);

  if (options.with_decision) {
    CommConfig best;
    best.bucket_cap_mb = 5;
    best.algorithm = Algorithm::kReduceScatter;
    best.streams = 2;
    json pairs = json::array();
    for (int repeat = 0; repeat < 3; ++repeat) {
      add_measured("candidate", best, options.with_metrics);
      add_measured("baseline", CommConfig{}, options.with_metrics);
    }
    Decision d;
    d.key = {s.instance_type, s.model_signature, s.precision, s.world_size, s.nnodes};
    d.model_name = s.model_name;
    d.config = best;
    d.session_id = id;
    d.torch_version = "2.15.0";
    d.batch_size = kBatch;
    d.speedup = 1.21;
    d.ci_low = 1.15;
    d.ci_high = 1.27;
    d.evidence_json = json{{"method", "bootstrap"}, {"resamples", 10000}, {"pairs", 3},
                           {"pair_speedups", {1.19, 1.21, 1.24}}}
                          .dump();
    d.note = "accepted: the 95% interval excludes 1";
    store.add_decision(d);
  }
  store.finish_session(id, "done");
  return id;
}

}  // namespace acspeed::testing
