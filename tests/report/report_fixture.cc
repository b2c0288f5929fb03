#include "report_fixture.h"

#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

#include "acspeed/error.h"
#include "acspeed/tuner/statistics.h"
#include "acspeed/tuner/trial_metrics.h"

namespace acspeed::testing {
namespace {

using json = nlohmann::json;

constexpr int64_t kBatch = 32;
constexpr int64_t kWorld = 2;
constexpr int kSteps = 20;
constexpr const char* kSignature = "sig-3f2a9c";

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

TrialRecord trial(int64_t session, int64_t& ordinal, TrialRole role, const CommConfig& config) {
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
  s.model_signature = kSignature;
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

  // As the tuner writes a trial: raw step times, and metrics_json per tuner/include/acspeed/tuner/trial_metrics.h.
  auto add_measured = [&](TrialRole role, const CommConfig& config, bool metrics,
                          std::optional<int> pair = std::nullopt) {
    TrialRecord t = trial(id, ordinal, role, config);
    const Cost cost = cost_of(config);
    t.step_times_s = steps(cost, rng);
    if (metrics) {
      auto m = tuner::metrics_from_steps(t.step_times_s, static_cast<int>(kBatch), 3);
      m.compute_s = cost.compute_s;
      m.comm_s = cost.comm_s;
      m.exposed_comm_s = cost.exposed_s;
      m.probe = "cpu";
      m.loss = 6.9 - 0.01 * static_cast<double>(t.ordinal);
      m.pair = pair;
      t.metrics_json = tuner::metrics_to_json(m);
    }
    store.add_trial(t);
    return t.step_times_s;
  };

  add_measured(TrialRole::kSearch, CommConfig{}, options.with_metrics);
  for (const auto algorithm : {Algorithm::kAllreduce, Algorithm::kReduceScatter}) {
    for (const int streams : {1, 2}) {
      for (const double bucket : {1.0, 5.0, 25.0, 100.0}) {
        CommConfig c;
        c.bucket_cap_mb = bucket;
        c.algorithm = algorithm;
        c.streams = streams;
        add_measured(TrialRole::kSearch, c, options.with_metrics);
      }
    }
  }
  CommConfig broken;
  broken.bucket_cap_mb = 200;
  broken.streams = 4;
  TrialRecord failed = trial(id, ordinal, TrialRole::kSearch, broken);
  failed.status = TrialStatus::kFailed;
  failed.error = options.error_text;
  store.add_trial(failed);

  if (options.with_decision) {
    CommConfig best;
    best.bucket_cap_mb = 5;
    best.algorithm = Algorithm::kReduceScatter;
    best.streams = 2;
    // Alternated as the tuner does: candidate first in even pairs, baseline first in odd ones.
    json pairs = json::array();
    std::vector<double> speedups;
    for (int repeat = 0; repeat < 3; ++repeat) {
      std::vector<double> c, b;
      if (repeat % 2 == 0) {
        c = add_measured(TrialRole::kCandidate, best, options.with_metrics, repeat);
        b = add_measured(TrialRole::kBaseline, CommConfig{}, options.with_metrics, repeat);
      } else {
        b = add_measured(TrialRole::kBaseline, CommConfig{}, options.with_metrics, repeat);
        c = add_measured(TrialRole::kCandidate, best, options.with_metrics, repeat);
      }
      speedups.push_back(tuner::median(b) / tuner::median(c));
      pairs.push_back({{"order", repeat % 2 == 0 ? "candidate-first" : "baseline-first"},
                       {"candidate_step_times_s", c},
                       {"baseline_step_times_s", b},
                       {"speedup", speedups.back()}});
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
    d.evidence_json = json{{"seed", options.seed},
                           {"method", "Student t 95% interval of the mean log pair speedup"},
                           {"candidate", best},
                           {"pairs", pairs},
                           {"pair_speedups", speedups},
                           {"loss_tolerance", 0.05}}
                          .dump();
    d.note = "accepted: the 95% interval excludes 1";
    store.add_decision(d);
  }
  store.finish_session(id, SessionStatus::kDone);
  return id;
}

tuner::StoredOnline add_sample_online_session(Store& store, const SampleOnlineOptions& options) {
  tuner::OnlineOptions o;
  o.seed = options.seed;
  o.lookahead = 2;  // as the job drives it (python/acspeed/online.py)
  o.warmup_steps = options.warmup_steps;
  tuner::OnlineTuner tuner(tuner::online_space(json::object(), 2, 1, false), o);
  std::mt19937_64 rng(options.seed);
  std::uniform_real_distribution<double> noise(0.99, 1.01);
  // The job's protocol: windows 0..lookahead planned first; after window k, its times pushed and
  // window k + lookahead + 1 planned.
  for (int k = 0; k <= o.lookahead; ++k) tuner.window(k);
  // The boundary into the decision makes no collective: the window before it is run, not pushed.
  for (int k = 0; !tuner.window(k + 1).settled; ++k) {
    ACS_ENFORCE(k < 200, "the sample online tuner did not settle within 200 windows");
    const tuner::WindowPlan plan = tuner.window(k);
    std::vector<double> times;
    for (int i = 0; i < plan.steps; ++i) times.push_back((plan.config.streams == 2 ? 0.07 : 0.1) * noise(rng));
    tuner.push(k, times);
    tuner.window(k + o.lookahead + 1);
  }
  tuner::OnlineJob job;
  job.key = {options.instance_type, kSignature, "fp32", kWorld, 1, false};
  job.model_name = options.model_name;
  job.batch_size = kBatch;
  job.torch_version = "2.15.0";
  job.versions = json{{"torch", "2.15.0"}, {"nccl", nullptr}, {"cuda", nullptr}};
  return tuner::store_online(store, tuner, job);
}

}  // namespace acspeed::testing
