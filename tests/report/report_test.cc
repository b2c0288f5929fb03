// acspeed-tune report: every format produced from a session stored through the Store API.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "acspeed/error.h"
#include "acspeed/store.h"
#include "acspeed/report/report.h"
#include "render.h"
#include "report_fixture.h"
#include "trial_columns.h"
#include "acspeed/tuner/effective_speedup.h"
#include "acspeed/tuner/statistics.h"

namespace acspeed::report {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class TempStore {
 public:
  TempStore() {
    std::random_device rd;
    dir_ = fs::path(::testing::TempDir()) / ("acspeed-report-" + std::to_string(rd()));
    fs::create_directories(dir_);
    StoreOptions options;
    options.path = (dir_ / "acspeed.db").string();
    store_ = Store::open(options);
  }
  ~TempStore() {
    store_.reset();
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  Store& store() { return *store_; }

 private:
  fs::path dir_;
  std::unique_ptr<Store> store_;
};

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

// A strict RFC 4180 reader for the test: quoted fields, doubled quotes, CRLF records.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1);
  std::string field;
  bool quoted = false, was_quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      EXPECT_TRUE(field.empty() && !was_quoted) << "quote inside an unquoted field at byte " << i;
      quoted = was_quoted = true;
    } else if (c == ',') {
      rows.back().push_back(field);
      field.clear();
      was_quoted = false;
    } else if (c == '\r') {
      EXPECT_TRUE(i + 1 < text.size() && text[i + 1] == '\n') << "bare CR at byte " << i;
      rows.back().push_back(field);
      field.clear();
      was_quoted = false;
      rows.emplace_back();
      ++i;
    } else {
      EXPECT_NE(c, '\n') << "bare LF outside quotes at byte " << i;
      field += c;
    }
  }
  EXPECT_FALSE(quoted) << "unterminated quoted field";
  EXPECT_TRUE(rows.back().empty() && field.empty()) << "last record not terminated by CRLF";
  rows.pop_back();
  return rows;
}

TEST(ReportStats, PercentilesInterpolateBetweenOrderStatistics) {
  const auto s = step_stats({4.0, 1.0, 3.0, 2.0});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->count, 4u);
  EXPECT_DOUBLE_EQ(s->min, 1.0);
  EXPECT_DOUBLE_EQ(s->max, 4.0);
  EXPECT_DOUBLE_EQ(s->p25, 1.75);
  EXPECT_DOUBLE_EQ(s->p50, 2.5);
  EXPECT_DOUBLE_EQ(s->p90, 3.7);
  EXPECT_DOUBLE_EQ(s->p95, 3.85);
  EXPECT_DOUBLE_EQ(s->mean, 2.5);
  EXPECT_DOUBLE_EQ(step_stats({0.054})->p95, 0.054);
  EXPECT_FALSE(step_stats({}));
}

TEST(ReportFormat, UnknownFormatNamesTheValueAndTheAcceptedOnes) {
  EXPECT_EQ(parse_format("html"), Format::kHtml);
  EXPECT_EQ(parse_format("md"), Format::kMarkdown);
  try {
    parse_format("pdf");
    FAIL() << "pdf accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'pdf'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("md, json, csv, html"), std::string::npos) << e.what();
  }
}

TEST(ReportCsv, FieldsAreQuotedPerRfc4180) {
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field(""), "");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_field("cr\rhere"), "\"cr\rhere\"");
  EXPECT_EQ(csv_field(" padded"), "\" padded\"");
}

TEST(Report, UnknownSessionIsAnError) {
  TempStore temp;
  EXPECT_THROW(build_report(temp.store(), 42), InvalidArgument);
}

TEST(Report, ComputesBaselineSpeedupsPairsAndTheWinnerFromRawStepTimes) {
  TempStore temp;
  const int64_t id = acspeed::testing::add_sample_session(temp.store());
  const Report r = build_report(temp.store(), id);
  const auto trials = temp.store().trials(id);
  ASSERT_EQ(r.trials.size(), trials.size());
  ASSERT_EQ(r.trials.size(), 1u + 16u + 1u + 6u);

  ASSERT_TRUE(r.baseline);
  EXPECT_EQ(r.baseline->source, "baseline trials (alternated with the candidate)");
  std::vector<double> pooled;
  for (const auto& t : trials) {
    if (t.role == TrialRole::kBaseline) pooled.insert(pooled.end(), t.step_times_s.begin(), t.step_times_s.end());
  }
  EXPECT_EQ(r.baseline->times_s, pooled);
  EXPECT_DOUBLE_EQ(r.baseline->stats.p50, tuner::percentile(pooled, 50));

  for (const auto& t : r.trials) {
    if (t.record.status != TrialStatus::kOk) {
      EXPECT_FALSE(t.stats);
      EXPECT_FALSE(t.speedup_vs_baseline);
      EXPECT_FALSE(t.samples_per_s);
      continue;
    }
    ASSERT_TRUE(t.stats);
    EXPECT_DOUBLE_EQ(t.stats->p50, tuner::percentile(t.record.step_times_s, 50));
    EXPECT_DOUBLE_EQ(*t.samples_per_s, 32.0 * 2.0 / t.stats->p50);
    // A trial of DDP's defaults measures the baseline itself: no speedup over itself.
    EXPECT_EQ(t.is_baseline, t.config->is_default()) << t.record.ordinal;
    if (t.is_baseline) {
      EXPECT_FALSE(t.speedup_vs_baseline) << t.record.ordinal;
    } else {
      EXPECT_DOUBLE_EQ(*t.speedup_vs_baseline, r.baseline->stats.p50 / t.stats->p50);
    }
    ASSERT_TRUE(t.metrics.exposed_comm_s);
  }

  ASSERT_TRUE(r.decision);
  EXPECT_EQ(r.decision->session_id, id);
  ASSERT_TRUE(r.best);
  EXPECT_EQ(r.best->config, r.decision->config);
  EXPECT_EQ(r.best->source, "candidate trials (alternated with the baseline)");
  EXPECT_EQ(r.best->trial_ids.size(), 3u);
  ASSERT_EQ(r.pairs.size(), 3u);
  for (const auto& p : r.pairs) {
    EXPECT_DOUBLE_EQ(p.speedup, p.baseline_p50_s / p.candidate_p50_s);
    EXPECT_GT(p.speedup, 1.1) << "the synthetic winner is ~1.3x faster";
  }
  EXPECT_EQ(r.pairs[0].baseline_trial, r.pairs[0].candidate_trial + 1) << "pair 0: candidate first";
  EXPECT_EQ(r.pairs[1].candidate_trial, r.pairs[1].baseline_trial + 1) << "pair 1: baseline first";
  EXPECT_EQ(r.pairs[2].baseline_trial, r.pairs[2].candidate_trial + 1) << "pair 2: candidate first";
}

// A two-node session with the step model's trials: compute 100 ms (forward + optimizer 40 ms), the
// defaults' 3 buckets of 46.8 MB through acspeed's hook in 0.38 s, DDP's defaults at 0.46 s, fp16
// at 0.32 s (its hook: 10 buckets of 23.4 MB on the wire in 0.207 s) and 5 MiB buckets at 0.48 s
// (10 buckets of 46.8 MB in 0.394 s: with the calibration, the link's latency and bandwidth).
int64_t add_model_session(Store& store) {
  SessionRecord s;
  s.instance_type = "testbed-2x1@1gbit";
  s.model_name = "resnet18";
  s.world_size = 2;
  s.nnodes = 2;
  s.batch_size = 16;
  const int64_t id = store.create_session(s);
  auto add = [&](TrialRole role, const CommConfig& c, double step, const std::string& metrics) {
    TrialRecord t;
    t.session_id = id;
    t.role = role;
    t.config_json = config_to_json(c);
    t.step_times_s = {step, step, step};
    t.metrics_json = metrics;
    store.add_trial(t);
  };
  CommConfig fp16;
  fp16.bucket_cap_mb = 5;
  fp16.compression = Compression::kFp16;
  add(TrialRole::kCompute, {}, 0.1, R"({"p50_s": 0.1, "forward_s": 0.03, "optimizer_s": 0.01, "finite": true})");
  add(TrialRole::kCalibration, {}, 0.47,
      R"({"p50_s": 0.47, "bucket_count": 3, "bucket_bytes": 46800000, "comm_s": 0.3804, "finite": true})");
  add(TrialRole::kSearch, {}, 0.46, R"({"p50_s": 0.46, "finite": true})");
  add(TrialRole::kSearch, fp16, 0.32,
      R"({"p50_s": 0.32, "bucket_count": 10, "bucket_bytes": 46800000, "comm_s": 0.2072, "finite": true})");
  CommConfig small_buckets;
  small_buckets.bucket_cap_mb = 5;
  add(TrialRole::kSearch, small_buckets, 0.48,
      R"({"p50_s": 0.48, "bucket_count": 10, "bucket_bytes": 46800000, "comm_s": 0.3944, "finite": true})");
  return id;
}

TEST(Report, EveryFormatShowsTheBoundAndEfficiencyOfTheStepModel) {
  TempStore temp;
  const int64_t id = add_model_session(temp.store());
  const Report r = build_report(temp.store(), id);
  EXPECT_TRUE(r.model_note.empty()) << r.model_note;
  ASSERT_EQ(r.trials.size(), 5u);
  EXPECT_FALSE(r.trials[0].bound_s) << "the compute-only trial has no bound of its own";
  // Latency 2 ms and 125 MB/s from the two uncast hooked trials: bound = 40 ms + wire bytes / 125 MB/s.
  ASSERT_TRUE(r.trials[2].bound_s && r.trials[3].bound_s);
  EXPECT_NEAR(*r.trials[2].bound_s, 0.04 + 46.8e6 / 125e6, 1e-4);
  EXPECT_NEAR(*r.trials[3].bound_s, 0.04 + 23.4e6 / 125e6, 1e-4);
  EXPECT_NEAR(*r.trials[3].efficiency, (0.04 + 23.4e6 / 125e6) / 0.32, 1e-3);
  ASSERT_TRUE(r.baseline);
  EXPECT_DOUBLE_EQ(r.baseline->stats.p50, 0.46) << "neither compute-only nor calibration trials are the baseline";

  const json j = json::parse(render_json(r, {}));
  EXPECT_NEAR(j["trials"][3]["bound_s"].get<double>(), 0.2272, 1e-4);
  EXPECT_NEAR(j["trials"][3]["efficiency"].get<double>(), 0.2272 / 0.32, 1e-3);
  EXPECT_TRUE(j["trials"][0]["bound_s"].is_null());
  EXPECT_NEAR(j["model"]["compute_s"].get<double>(), 0.1, 1e-12);
  EXPECT_TRUE(j["model"]["not_predicted"].is_null());

  const auto csv = parse_csv(render_csv(r));
  const auto& header = csv[0];
  const auto column = std::find(header.begin(), header.end(), "efficiency") - header.begin();
  ASSERT_LT(static_cast<size_t>(column), header.size());
  EXPECT_EQ(csv[4][static_cast<size_t>(column)].substr(0, 4), "0.71");

  const std::string md = render_markdown(r, {});
  EXPECT_NE(md.find("| Bound (ms) | Efficiency |"), std::string::npos);
  EXPECT_NE(md.find("| 227.20 | 71% |"), std::string::npos) << md;
  const std::string html = render_html(r, {});
  EXPECT_NE(html.find("Measured step time against the bound, per configuration"), std::string::npos);
  EXPECT_NE(html.find("320.0 / 227.2 ms (71%)"), std::string::npos);
}

TEST(Report, ASessionWithoutTheModelsTrialsSaysWhyThereIsNoBound) {
  TempStore temp;
  const int64_t id = testing::add_sample_session(temp.store());
  const Report r = build_report(temp.store(), id);
  EXPECT_FALSE(r.model_note.empty());
  for (const auto& t : r.trials) EXPECT_FALSE(t.bound_s);
  EXPECT_NE(render_markdown(r, {}).find("No bound: "), std::string::npos);
  EXPECT_NE(render_html(r, {}).find("No bound to plot: "), std::string::npos);
}

TEST(Report, CompressedTrialsShowTheGuardsVerdictPowerSgdComputeAndTheirLossCurves) {
  TempStore temp;
  SessionRecord s;
  s.instance_type = "cpu";
  s.model_name = "tiny";
  s.world_size = 2;
  s.batch_size = 8;
  const int64_t id = temp.store().create_session(s);
  TrialRecord reference;
  reference.session_id = id;
  reference.config_json = config_to_json(CommConfig{});
  reference.step_times_s = {0.4, 0.4};
  reference.metrics_json = R"({"losses": [7.08, 1.0, 0.0406], "trajectory": [7.08, 1.0, 0.0406], "loss": 0.0406,
    "finite": true})";
  temp.store().add_trial(reference);
  TrialRecord compressed = reference;
  compressed.ordinal = 1;
  CommConfig psgd;
  psgd.compression = Compression::kPowerSgd;
  psgd.powersgd_rank = 1;
  compressed.config_json = config_to_json(psgd);
  compressed.status = TrialStatus::kFailed;
  compressed.error = "convergence guard: loss over the last steps 0.39 vs 0.0406 uncompressed";
  compressed.step_times_s = {0.15, 0.15};
  compressed.metrics_json = R"({"losses": [7.08, 2.0, 0.39], "trajectory": [7.08, 2.0, 0.39], "loss": 0.39,
    "finite": true, "compression_s": 0.0042,
    "inflation": {"kind": "measured", "estimate": 1.4, "low": 1.2, "high": 1.6},
    "guard": {"passed": false, "reason": "loss", "fidelity": {"cosine": 0.71, "norm_error": 0.12},
              "loss": {"excess": 0.3494, "allowed": 0.0704}}})";
  temp.store().add_trial(compressed);
  TrialRecord reused = compressed;  // another bucket size, judged on trial 1's fidelity window
  reused.ordinal = 2;
  reused.metrics_json = R"({"losses": [7.08, 2.0, 0.39], "trajectory": [7.08, 2.0, 0.39], "trajectory_trial": 1,
    "loss": 0.39, "finite": true, "fidelity_trial": 1,
    "guard": {"passed": false, "reason": "loss", "fidelity": {"cosine": 0.71, "norm_error": 0.12, "from_trial": 1},
              "loss": {"excess": 0.3494, "allowed": 0.0704}}})";
  temp.store().add_trial(reused);
  TrialRecord undecided = reference;  // a loss check failed within its noise: not a rejection (tuner/src/guard.h)
  undecided.ordinal = 3;
  psgd.powersgd_rank = 4;
  undecided.config_json = config_to_json(psgd);
  undecided.step_times_s = {0.15, 0.15};
  undecided.metrics_json = R"({"trajectory": [7.08, 1.0, 0.06], "loss": 0.06, "finite": true,
    "guard": {"passed": false, "undecided": "its loss check failed within noise: ...",
              "fidelity": {"cosine": 0.93, "norm_error": 0.05}, "loss": {"excess": 0.0194, "allowed": 0.0102}}})";
  temp.store().add_trial(undecided);
  TrialRecord overruled = reference;  // a near-exact numerics' loss check overruled (tuner/src/guard.h)
  overruled.ordinal = 4;
  CommConfig fp16;
  fp16.compression = Compression::kFp16;
  overruled.config_json = config_to_json(fp16);
  overruled.metrics_json = R"({"trajectory": [7.08, 1.0, 0.33], "loss": 0.33, "finite": true,
    "guard": {"passed": true, "fidelity": {"cosine": 0.99999, "norm_error": 0.00001},
              "loss": {"excess": 0.126, "allowed": 0.05135, "passed": false, "overruled": "near-exact"}}})";
  temp.store().add_trial(overruled);
  psgd.powersgd_rank = 1;
  // The decision's step speedup, inflation and effective speedup (tuner/include/acspeed/tuner/effective_speedup.h).
  Decision d;
  d.key = {"cpu", "sig", "fp32", 2, 1};
  d.model_name = "tiny";
  d.session_id = id;
  d.config = psgd;
  tuner::Inflation inflation;
  inflation.kind = tuner::InflationKind::kMeasured;
  inflation.estimate = 1.4;
  inflation.low = 1.2;
  inflation.high = 1.6;
  d.evidence_json = json{{"speedups", tuner::effective_speedup(2.667, 2.5, 2.8, inflation)},
                         {"data", "synthetic (fresh random inputs each step)"}}
                        .dump();
  temp.store().add_decision(d);
  const Report r = build_report(temp.store(), id);

  const std::string md = render_markdown(r, {});
  EXPECT_NE(md.find("| - | - | 4.20 | fail (cos 0.710, norm err 0.120; loss +0.3494, allowed 0.0704; inflation "
                    "1.40x \\[1.20, 1.60\\]) | failed |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("fail (cos 0.710, norm err 0.120 (window of trial 1); loss +0.3494"), std::string::npos) << md;
  EXPECT_NE(md.find("| undecided (cos 0.930, norm err 0.050; loss +0.0194, allowed 0.0102; undecided: its loss check "
                    "failed within noise: ...) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| pass (cos 1.000, norm err 0.000; loss +0.126, allowed 0.05135 (overruled: near-exact)) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("step 2.667x \\[2.500, 2.800\\], inflation 1.40x \\[1.20, 1.60\\], effective 1.905x (lower end "
                    "1.562)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("trained on: synthetic"), std::string::npos) << md;
  const std::string csv = render_csv(r);
  EXPECT_NE(csv.find("0.0042,0.39,\"fail (cos 0.710, norm err 0.120; loss +0.3494, allowed 0.0704; inflation 1.40x "
                     "[1.20, 1.60])\""),
            std::string::npos)
      << csv;
  // Step speedup 0.4 / 0.15, inflation 1.4, effective speedup = their ratio, side by side.
  EXPECT_NE(csv.find(",2.66666667,1.4,1.9047619,"), std::string::npos) << csv;
  const json j = json::parse(render_json(r, {}));
  EXPECT_EQ(j["trials"][1]["guard"]["passed"], false);
  EXPECT_DOUBLE_EQ(j["trials"][1]["compression_s"].get<double>(), 0.0042);
  EXPECT_DOUBLE_EQ(j["trials"][1]["inflation"]["estimate"].get<double>(), 1.4);
  EXPECT_NEAR(j["trials"][1]["effective_speedup_vs_baseline"].get<double>(), 0.4 / 0.15 / 1.4, 1e-9);
  EXPECT_TRUE(j["trials"][0]["inflation"].is_null());
  EXPECT_DOUBLE_EQ(j["decision"]["speedups"]["inflation"]["high"].get<double>(), 1.6);
  EXPECT_NEAR(j["decision"]["speedups"]["effective_speedup"]["estimate"].get<double>(), 2.667 / 1.4, 1e-9);
  const std::string html = render_html(r, {});
  EXPECT_NE(html.find("Loss trajectories of the trials the convergence guard judged"), std::string::npos);
  EXPECT_NE(html.find("#1 allreduce, powersgd rank 1 (guard: fail, inflation 1.40x [1.20, 1.60])"), std::string::npos)
      << html;
  EXPECT_EQ(html.find("#2 allreduce"), std::string::npos);  // trial 2 reuses trial 1's trajectory: plotted once
  EXPECT_NE(html.find("#3 allreduce, powersgd rank 4 (guard: undecided)"), std::string::npos) << html;
  EXPECT_NE(html.find("#0 DDP defaults (uncompressed)"), std::string::npos);
}

TEST(Report, SessionWithoutBaselineDecisionOrMetricsShowsDashes) {
  TempStore temp;
  SessionRecord s;
  s.instance_type = "cpu";
  s.model_name = "tiny";
  s.world_size = 2;
  s.batch_size = 0;  // unknown: no samples/s
  const int64_t id = temp.store().create_session(s);
  TrialRecord t;
  t.session_id = id;
  CommConfig c;
  c.bucket_cap_mb = 5;
  t.config_json = config_to_json(c);
  t.step_times_s = {0.2, 0.3};
  temp.store().add_trial(t);
  const Report r = build_report(temp.store(), id);
  EXPECT_FALSE(r.baseline);
  EXPECT_FALSE(r.decision);
  EXPECT_FALSE(r.trials[0].speedup_vs_baseline);
  EXPECT_FALSE(r.trials[0].samples_per_s);

  const std::string md = render_markdown(r, {});
  EXPECT_NE(md.find("| 0 | search | bucket 5 MiB, allreduce | 2 | 250.00 | 290.00 | 295.00 | - | - | - | - | - | - | - | - | - | ok | - |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("No decision stored for this session"), std::string::npos);
  const json j = json::parse(render_json(r, {}));
  EXPECT_TRUE(j["decision"].is_null());
  EXPECT_TRUE(j["baseline"].is_null());
  EXPECT_TRUE(j["trials"][0]["samples_per_s"].is_null());
  EXPECT_TRUE(j["trials"][0]["exposed_comm_s"].is_null());
  const std::string html = render_html(r, {});
  EXPECT_NE(html.find("No decision stored for this session"), std::string::npos);
  EXPECT_NE(html.find("step time (no probe breakdown)"), std::string::npos);
}

class ReportFormats : public ::testing::Test {
 protected:
  void SetUp() override {
    acspeed::testing::SampleSessionOptions options;
    options.model_name = "resnet<script>alert('x')</script>&co";
    options.instance_type = "ecs.<b>gn7</b>|x";
    session_ = acspeed::testing::add_sample_session(temp_.store(), options);
    report_ = build_report(temp_.store(), session_);
    render_.command_line = {"acspeed-tune", "report", "--format", "x"};
  }
  TempStore temp_;
  int64_t session_ = 0;
  Report report_;
  RenderOptions render_;
};

TEST_F(ReportFormats, JsonIsVersionedAndMatchesTheStore) {
  const json j = json::parse(render_json(report_, render_));
  EXPECT_EQ(j["format"], kJsonFormatName);
  EXPECT_EQ(j["version"], kJsonFormatVersion);
  EXPECT_EQ(j["command_line"], json(render_.command_line));
  const auto session = *temp_.store().session(session_);
  EXPECT_EQ(j["session"]["id"], session.id);
  EXPECT_EQ(j["session"]["model_name"], session.model_name);
  EXPECT_EQ(j["session"]["instance_type"], session.instance_type);
  EXPECT_EQ(j["session"]["world_size"], session.world_size);
  EXPECT_EQ(j["session"]["batch_size_per_device"], session.batch_size);
  EXPECT_EQ(j["session"]["seed"], session.seed);
  EXPECT_EQ(j["session"]["search_space"], json::parse(session.search_space_json));
  EXPECT_EQ(j["session"]["versions"], json::parse(session.versions_json));

  const auto trials = temp_.store().trials(session_);
  ASSERT_EQ(j["trials"].size(), trials.size());
  for (size_t i = 0; i < trials.size(); ++i) {
    const auto& jt = j["trials"][i];
    EXPECT_EQ(jt["id"], trials[i].id);
    EXPECT_EQ(jt["role"], std::string(to_string(trials[i].role)));
    EXPECT_EQ(jt["status"], std::string(to_string(trials[i].status)));
    EXPECT_EQ(jt["step_times_s"].get<std::vector<double>>(), trials[i].step_times_s);
    EXPECT_EQ(jt["config"].get<CommConfig>(), config_from_json(trials[i].config_json));
    if (trials[i].status == TrialStatus::kOk) {
      EXPECT_DOUBLE_EQ(jt["step_time_s"]["p50"].get<double>(), tuner::percentile(trials[i].step_times_s, 50));
      EXPECT_EQ(jt["metrics"], json::parse(trials[i].metrics_json));
      EXPECT_DOUBLE_EQ(jt["samples_per_s"].get<double>(), 32.0 * 2 / jt["step_time_s"]["p50"].get<double>());
      EXPECT_DOUBLE_EQ(jt["samples_per_s_per_device"].get<double>(), jt["samples_per_s"].get<double>() / 2);
      EXPECT_TRUE(jt["error"].is_null());
    } else {
      EXPECT_TRUE(jt["step_time_s"].is_null());
      EXPECT_EQ(jt["error"], trials[i].error);
    }
  }
  const auto decisions = temp_.store().decisions();
  ASSERT_EQ(decisions.size(), 1u);
  const auto& d = decisions[0];
  EXPECT_EQ(j["decision"]["id"], d.id);
  EXPECT_EQ(j["decision"]["active"], true);
  EXPECT_EQ(j["decision"]["config"].get<CommConfig>(), d.config);
  EXPECT_DOUBLE_EQ(j["decision"]["speedup"].get<double>(), *d.speedup);
  EXPECT_DOUBLE_EQ(j["decision"]["ci_low"].get<double>(), *d.ci_low);
  EXPECT_DOUBLE_EQ(j["decision"]["ci_high"].get<double>(), *d.ci_high);
  EXPECT_EQ(j["decision"]["evidence"], json::parse(d.evidence_json));
  EXPECT_EQ(j["decision"]["repeats"].size(), 3u);
  EXPECT_EQ(j["baseline"]["trial_ids"].size(), 3u);
}

TEST_F(ReportFormats, CsvHasOneRowPerTrialUnitsInTheHeaderAndRoundTripsErrors) {
  const auto rows = parse_csv(render_csv(report_));
  const auto trials = temp_.store().trials(session_);
  ASSERT_EQ(rows.size(), trials.size() + 1);
  const auto& header = rows[0];
  for (const char* column : {"step_p50_s", "step_p90_s", "step_p95_s", "samples_per_s", "speedup_vs_baseline_x",
                             "exposed_comm_s", "error", "config_json"}) {
    EXPECT_NE(std::find(header.begin(), header.end(), column), header.end()) << column;
  }
  const auto col = [&header](const std::string& name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  for (size_t i = 0; i < trials.size(); ++i) {
    const auto& row = rows[i + 1];
    ASSERT_EQ(row.size(), header.size()) << "row " << i;
    EXPECT_EQ(row[col("trial_id")], std::to_string(trials[i].id));
    EXPECT_EQ(row[col("error")], trials[i].error);
    EXPECT_EQ(row[col("config_json")], trials[i].config_json);
    if (trials[i].status == TrialStatus::kOk) {
      EXPECT_NEAR(std::stod(row[col("step_p50_s")]), tuner::percentile(trials[i].step_times_s, 50), 1e-9);
    } else {
      EXPECT_EQ(row[col("step_p50_s")], "");
    }
  }
}

TEST_F(ReportFormats, MarkdownHasEveryTrialTheDecisionAndEscapedUserText) {
  const std::string md = render_markdown(report_, render_);
  EXPECT_EQ(md.find("<script>"), std::string::npos);
  EXPECT_NE(md.find("resnet\\<script\\>alert('x')\\</script\\>\\&co"), std::string::npos);
  EXPECT_NE(md.find("ecs.\\<b\\>gn7\\</b\\>\\|x"), std::string::npos);
  // One line per trial in the trials table, beginning with its number and role.
  for (const auto& t : report_.trials) {
    EXPECT_EQ(count(md, fmt::format("\n| {} | {} |", t.record.ordinal, to_string(t.record.role))), 1u) << t.record.ordinal;
  }
  EXPECT_NE(md.find("worker 1 exited: signal 9 (\"killed\"), see log, line 2 second line"), std::string::npos);
  EXPECT_NE(md.find("- Speedup over DDP defaults: 1.210x, 95% confidence interval \\[1.150, 1.270\\] over 3 alternated "
                    "repeat(s): the interval excludes 1"),
            std::string::npos);
  EXPECT_NE(md.find("### Alternated repeats"), std::string::npos);
  EXPECT_NE(md.find("\"bucket_cap_mb\": 5.0"), std::string::npos) << "the stored config is shown";
}

TEST_F(ReportFormats, HtmlIsSelfContainedWithThreePlotsAndEscapesUserStrings) {
  const std::string html = render_html(report_, render_);
  const std::string l = lower(html);
  EXPECT_EQ(l.find("<script"), std::string::npos) << "no script at all, and the model name is escaped";
  EXPECT_EQ(l.find("<b>"), std::string::npos);
  EXPECT_NE(html.find("resnet&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;co"), std::string::npos);
  EXPECT_NE(html.find("ecs.&lt;b&gt;gn7&lt;/b&gt;|x"), std::string::npos);
  EXPECT_NE(html.find("(&quot;killed&quot;)"), std::string::npos);
  EXPECT_EQ(count(html, "<svg"), 3u);
  // Nothing is fetched at view time: no external resources (the SVG namespace is a name, not a fetch).
  EXPECT_EQ(count(l, "http://") + count(l, "https://"), count(l, "xmlns=\"http://www.w3.org/2000/svg\""));
  for (const char* tag : {"<link", "<img", "<iframe", "@import", "url("}) EXPECT_EQ(l.find(tag), std::string::npos) << tag;
  // One point per successful search trial in the throughput plot, one bar trio per successful trial.
  size_t ok_search = 0, ok = 0;
  for (const auto& t : report_.trials) {
    ok += t.record.status == TrialStatus::kOk;
    ok_search += t.record.status == TrialStatus::kOk && t.record.role == TrialRole::kSearch;
  }
  EXPECT_EQ(count(html, "samples/s per device, p50"), ok_search);
  EXPECT_EQ(count(html, "fill=\"#D55E00\"><title>trial "), ok) << "an exposed-communication bar per trial";
}

TEST(ReportColumns, EveryColumnPeopleSeeHasItsPlaceAndEveryCsvColumnAName) {
  for (const ColumnFormat format : {kInMarkdown, kInHtml}) {
    size_t shown = 0;
    for (const auto& column : trial_columns()) shown += column.in(format) ? 1 : 0;
    EXPECT_EQ(human_columns(format).size(), shown) << "a column is missing from kHumanOrder";
  }
  std::vector<std::string_view> names;
  for (const auto& column : trial_columns()) {
    EXPECT_FALSE(column.name.empty());
    EXPECT_EQ(std::count(names.begin(), names.end(), column.name), 0) << column.name;
    names.push_back(column.name);
  }
}

TEST_F(ReportFormats, TheHeadersFollowTheColumnTableAndAnErrorRowSpansTheTrialsTable) {
  const std::string html = render_html(report_, render_);
  const size_t table = html.find("<table class=\"trials\">");
  ASSERT_NE(table, std::string::npos);
  const std::string header = html.substr(table, html.find("</tr>", table) - table);
  const auto columns = shown_columns(kInHtml, report_);
  EXPECT_EQ(count(header, "<th>"), columns.size());
  // The page leaves out what the session did not measure (no step model, no compression); Markdown
  // keeps every column.
  EXPECT_LT(columns.size(), human_columns(kInHtml).size());
  for (const char* absent : {"<th>Bound (ms)</th>", "<th>Efficiency</th>", "<th>Convergence guard</th>"}) {
    EXPECT_EQ(header.find(absent), std::string::npos) << absent;
  }
  for (const auto* column : columns) EXPECT_NE(header.find("<th>" + column->human_title() + "</th>"), std::string::npos);
  EXPECT_NE(html.find(fmt::format("<td colspan=\"{}\" class=\"error\">error: ", columns.size() - 1)), std::string::npos)
      << "the sample session has a failed trial";
  // Markdown: one header cell and one alignment per column, in the same order.
  const std::string md = render_markdown(report_, render_);
  std::string expected = "|";
  for (const auto* column : human_columns(kInMarkdown)) expected += " " + column->human_title() + " |";
  EXPECT_NE(md.find(expected + "\n"), std::string::npos) << expected;
}

TEST_F(ReportFormats, EveryFormatSaysItsRatesUnitAndShowsDdpDefaultsTrialsAsTheBaseline) {
  const std::string md = render_markdown(report_, render_);
  const std::string html = render_html(report_, render_);
  for (const std::string& text : {md, html}) {
    EXPECT_NE(text.find("Samples/s per device"), std::string::npos);
    EXPECT_NE(text.find("samples/s per device = 32 / p50 step time (x 2 devices for the whole job)"), std::string::npos);
  }
  // The loss every exact config measures alike is left out of the tables people read.
  EXPECT_EQ(md.find("| Loss |"), std::string::npos);
  EXPECT_EQ(html.find("<th>Loss</th>"), std::string::npos);
  // Trial 0 runs DDP's defaults: "baseline", never a speedup over itself.
  const auto& zero = report_.trials[0];
  ASSERT_TRUE(zero.config && zero.config->is_default());
  EXPECT_NE(md.find(fmt::format("| {:.1f} | baseline |", *zero.samples_per_s / 2)), std::string::npos) << md;
  EXPECT_NE(html.find(fmt::format("<td class=\"num\">{:.1f}</td><td class=\"num\">baseline</td>",
                                  *zero.samples_per_s / 2)),
            std::string::npos);
  const auto rows = parse_csv(render_csv(report_));
  const auto& header = rows[0];
  const auto col = [&header](const std::string& name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  EXPECT_EQ(rows[1][col("speedup_vs_baseline_x")], "");
  EXPECT_NEAR(std::stod(rows[1][col("samples_per_s")]), *zero.samples_per_s, 1e-6);
  EXPECT_NEAR(std::stod(rows[1][col("samples_per_s_per_device")]), *zero.samples_per_s / 2, 1e-6);
  EXPECT_NE(rows[2][col("speedup_vs_baseline_x")], "");
  EXPECT_NE(rows[1][col("loss")], "") << "the CSV keeps what each trial measured";
  EXPECT_TRUE(json::parse(render_json(report_, render_))["trials"][0]["speedup_vs_baseline"].is_null());
}

TEST_F(ReportFormats, HtmlOpensWithTheDecisionInWordsThenThePlotsThenTheSettings) {
  const std::string html = render_html(report_, render_);
  const size_t decision = html.find("<h2>Decision</h2>");
  const size_t plots = html.find("<h2>Plots</h2>");
  const size_t trials = html.find("<h2>Trials</h2>");
  const size_t settings = html.find("<h2>Settings</h2>");
  ASSERT_NE(decision, std::string::npos);
  EXPECT_LT(decision, plots);
  EXPECT_LT(plots, trials);
  EXPECT_LT(trials, settings);
  EXPECT_LT(html.find("<h3>Stored config</h3>"), std::string::npos);
  EXPECT_GT(html.find("<h3>Stored config</h3>"), settings);
  // The evidence in words, not the stored keys.
  const std::string words = html.substr(decision, plots - decision);
  EXPECT_NE(words.find("Speedup over DDP defaults: 1.210x, 95% confidence interval [1.150, 1.270] over 3 alternated "
                       "repeat(s): the interval excludes 1"),
            std::string::npos)
      << words;
  EXPECT_NE(words.find("Method: Student t 95% interval of the mean log pair speedup, seed 7; the pairs&#39; speedups: "),
            std::string::npos)
      << words;
  EXPECT_EQ(html.find("Evidence"), std::string::npos);
  EXPECT_EQ(html.find("candidate.bucket_cap_mb"), std::string::npos);
  const std::string md = render_markdown(report_, render_);
  EXPECT_NE(md.find("- Method: Student t 95% interval of the mean log pair speedup, seed 7"), std::string::npos) << md;
  EXPECT_EQ(md.find("### Evidence"), std::string::npos);
}

TEST(Report, AnOnlineSessionShowsItsKindAndItsWindowsOverTheJobsStepsInEveryFormat) {
  TempStore temp;
  const int64_t offline = acspeed::testing::add_sample_session(temp.store());
  const tuner::StoredOnline online = acspeed::testing::add_sample_online_session(temp.store());
  EXPECT_FALSE(online.active) << "the offline decision holds the key";
  const Report r = build_report(temp.store(), online.session_id);
  ASSERT_TRUE(r.decision.has_value());
  const auto trials = temp.store().trials(online.session_id);
  ASSERT_GE(trials.size(), 8u);
  ASSERT_EQ(r.trials.size(), trials.size());
  ASSERT_EQ(r.warmup_steps, 10);
  // Every window tiles the job's steps after the warm-up, as the job ran them.
  int64_t next = 10;
  for (const auto& t : r.trials) {
    ASSERT_TRUE(t.window.has_value()) << t.record.ordinal;
    EXPECT_EQ(t.window->first_step, next) << t.record.ordinal;
    EXPECT_EQ(t.window->last_step, t.window->first_step + t.window->steps - 1);
    EXPECT_EQ(t.window->steps, t.window->discarded + static_cast<int64_t>(t.record.step_times_s.size()));
    EXPECT_TRUE(t.window->ran == "baseline" || t.window->ran == "candidate") << t.window->ran;
    next = t.window->last_step + 1;
  }
  // The decision runs from the step the tuner recorded: past the last stored window, since the window
  // that ran while the verdict was reached makes no boundary collective and is not measured.
  const json evidence = json::parse(r.decision->evidence_json);
  ASSERT_TRUE(r.decision_from_step.has_value());
  EXPECT_EQ(*r.decision_from_step, evidence["online"]["decision_from_step"].get<int64_t>());
  EXPECT_GT(*r.decision_from_step, next);
  const int64_t from = *r.decision_from_step;
  // The alternated repeats are the verdict's pairs: the waits run while its results were awaited are
  // search trials, shown with their phase.
  EXPECT_EQ(r.pairs.size(), evidence["pairs"].size());
  EXPECT_EQ(r.pairs.size(), static_cast<size_t>(std::count_if(r.trials.begin(), r.trials.end(), [](const auto& t) {
              return t.record.role == TrialRole::kCandidate;
            })));
  EXPECT_GE(std::count_if(r.trials.begin(), r.trials.end(), [](const auto& t) {
              return t.window->phase == "wait" && t.record.role == TrialRole::kSearch && !t.window->pair;
            }),
            2);

  const std::string md = render_markdown(r, {});
  EXPECT_NE(md.find("| Kind | online (tuned inside the training job) |"), std::string::npos) << md;
  EXPECT_NE(md.find("## Windows over the job's steps"), std::string::npos);
  EXPECT_NE(md.find(fmt::format("The decision runs from step {}", from)), std::string::npos);
  const auto& first = r.trials.front();
  EXPECT_NE(md.find(fmt::format("\n| 0 | 10 | {} | 0 | baseline | search | 0 | yes | {} | {} | {} |", first.window->last_step,
                                first.config_text, first.record.step_times_s.size(),
                                format_ms(first.stats->p50))),
            std::string::npos)
      << md;
  size_t rows = 0;
  for (const auto& t : r.trials) {
    rows += count(md, fmt::format("\n| {} | {} | {} |", t.record.ordinal, t.window->first_step, t.window->last_step));
  }
  EXPECT_EQ(rows, r.trials.size());

  const json j = json::parse(render_json(r, {}));
  EXPECT_EQ(j["session"]["kind"], "online");
  EXPECT_EQ(j["online"]["warmup_steps"], 10);
  EXPECT_EQ(j["online"]["decision_from_step"], from);
  for (size_t i = 0; i < trials.size(); ++i) {
    const json& w = j["trials"][i]["window"];
    const json stored = json::parse(trials[i].metrics_json)["online_window"];
    EXPECT_EQ(w["first_step"], stored["first_step"]);
    EXPECT_EQ(w["last_step"], stored["first_step"].get<int64_t>() + stored["steps"].get<int64_t>() - 1);
    EXPECT_EQ(w["ran"], stored["role"]);
    EXPECT_EQ(w["phase"], stored["phase"]);
    EXPECT_EQ(w["used"], stored["used"]);
  }

  const auto csv = parse_csv(render_csv(r));
  const auto& header = csv[0];
  const auto col = [&header](const std::string& name) {
    const auto at = std::find(header.begin(), header.end(), name);
    EXPECT_NE(at, header.end()) << name;
    return static_cast<size_t>(at - header.begin());
  };
  ASSERT_EQ(csv.size(), trials.size() + 1);
  for (size_t i = 0; i < trials.size(); ++i) {
    const auto& row = csv[i + 1];
    EXPECT_EQ(row[col("session_kind")], "online");
    EXPECT_EQ(row[col("window_first_step")], std::to_string(r.trials[i].window->first_step));
    EXPECT_EQ(row[col("window_last_step")], std::to_string(r.trials[i].window->last_step));
    EXPECT_EQ(row[col("window_ran")], r.trials[i].window->ran);
  }

  const std::string html = render_html(r, {});
  EXPECT_NE(html.find("online (tuned inside the training job)"), std::string::npos);
  EXPECT_NE(html.find("<title>Online windows over the job&#39;s steps</title>"), std::string::npos);
  // One bar with its tooltip per window; one dot per measured step; the decision's line.
  size_t measured = 0;
  for (const auto& t : r.trials) measured += t.record.step_times_s.size();
  EXPECT_EQ(count(html, "<title>window "), r.trials.size() + count(html, " discarded (a switch)</title>"));
  EXPECT_EQ(count(html, "r=\"2.2\""), measured);
  EXPECT_NE(html.find(fmt::format("decision from step {}", from)), std::string::npos);
  EXPECT_NE(html.find(fmt::format("<title>steps {}-{}: ran while the verdict was reached, not measured</title>", next,
                                  from - 1)),
            std::string::npos);
  EXPECT_NE(html.find("warm-up: steps 0-9"), std::string::npos);

  // An offline session says its kind and has no windows.
  const Report o = build_report(temp.store(), offline);
  EXPECT_NE(render_markdown(o, {}).find("| Kind | offline (acspeed-tune) |"), std::string::npos);
  EXPECT_EQ(render_markdown(o, {}).find("## Windows"), std::string::npos);
  EXPECT_EQ(json::parse(render_json(o, {}))["session"]["kind"], "offline");
  EXPECT_TRUE(json::parse(render_json(o, {}))["online"].is_null());
  EXPECT_EQ(render_html(o, {}).find("Online windows"), std::string::npos);
  EXPECT_EQ(parse_csv(render_csv(o))[1][col("window_first_step")], "");
}

}  // namespace
}  // namespace acspeed::report
