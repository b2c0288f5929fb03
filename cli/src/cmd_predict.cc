// acspeed-tune predict (--session ID | --latest) [--link RATE,...] [--nnodes N,...] [--nproc-per-node N] [--json]
// What the session's step model (tuner/include/acspeed/tuner/step_model.h) predicts for DDP's defaults and each measured
// config on other link rates and node counts: one table with units in the header, or versioned JSON.
// The link is fitted per flow count (tuner/include/acspeed/tuner/flows.h); a config of a flow count the session never ran is
// not predicted (a note says so).
// Reads only. What the session cannot predict is said, never filled with a number.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "acspeed/error.h"
#include "acspeed/fingerprint.h"
#include "acspeed/link_rate.h"
#include "acspeed/settings.h"
#include "acspeed/strings.h"
#include "acspeed/tuner/step_model.h"
#include "acspeed/tuner/trial_metrics.h"
#include "cli.h"
#include "table.h"

namespace acspeed::cli {
namespace {

using nlohmann::json;

inline constexpr int kPredictJsonVersion = 1;

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

struct Row {
  CommConfig config;
  bool baseline = false;
  int64_t link_bps = 0;
  int nnodes = 0;
  int nproc_per_node = 0;
  tuner::Prediction prediction;
  std::optional<double> measured_s;  // on the calibration link and node count
};

std::string ms(double s) { return fmt::format("{:.1f}", s * 1e3); }

// The link fit of each flow count the session calibrated (step_model.h).
json links_json(const tuner::StepModel& model) {
  json out = json::array();
  for (const auto& [flows, link] : model.links) {
    out.push_back({{"flows", flows},
                   {"fitted_bytes_per_s", link.pooled.bytes_per_s},
                   {"latency_s", link.pooled.latency_s},
                   {"fit_samples", link.pooled.samples}});
  }
  return out;
}

}  // namespace

int cmd_predict(const GlobalOptions& global, const std::vector<std::string>& args) {
  const std::string usage =
      "acspeed-tune predict (--session ID | --latest) [--link RATE[,RATE...]] [--nnodes N[,N...]] "
      "[--nproc-per-node N] [--json]";
  po::options_description options("predict options");
  options.add_options()("session", po::value<std::string>(), "predict from this session ID (`acspeed-tune sessions`)")(
      "latest", "predict from the most recent session")(
      "link", po::value<std::string>(),
      "link rates per node and direction, e.g. 500mbit,2gbit,10gbit (default: the calibration link)")(
      "nnodes", po::value<std::string>(), "node counts, e.g. 2,4 (default: the session's)")(
      "nproc-per-node", po::value<int>(), "ranks per node (default: the session's)")(
      "json", "versioned JSON instead of the table");
  po::variables_map vm;
  if (!parse_args(usage, options, {}, args, vm)) return kExitOk;
  if (vm.count("session") == vm.count("latest")) {
    ACS_THROW(InvalidArgument, "give one of --session ID and --latest");
  }
  std::vector<std::optional<int64_t>> links = {std::nullopt};  // nullopt: the calibration link
  if (vm.count("link")) {
    links.clear();
    for (const auto& text : split_list(vm["link"].as<std::string>())) links.push_back(parse_rate("--link", text));
  }
  std::vector<int> node_counts;  // empty: the session's
  if (vm.count("nnodes")) {
    for (const auto& text : split_list(vm["nnodes"].as<std::string>())) {
      node_counts.push_back(static_cast<int>(parse_int("--nnodes", text, 1, 4096)));
    }
  }
  if (vm.count("nproc-per-node") && vm["nproc-per-node"].as<int>() < 1) {
    ACS_THROW(InvalidArgument, "--nproc-per-node {} must be at least 1", vm["nproc-per-node"].as<int>());
  }
  auto store = open_store(global, false);
  const SessionRecord session = pick_session(*store, vm);
  if (node_counts.empty()) node_counts = {static_cast<int>(session.nnodes)};
  const int calibration_per_node =
      static_cast<int>(session.nnodes > 0 ? session.world_size / session.nnodes : session.world_size);
  const int per_node = vm.count("nproc-per-node") ? vm["nproc-per-node"].as<int>() : calibration_per_node;

  const tuner::StepModel model = tuner::session_model(*store, session);
  std::vector<std::string> notes;
  const std::string here = fingerprint().instance_type;
  if (session.instance_type != here) {
    notes.push_back(fmt::format("session {} was tuned on instance type '{}', this machine is '{}': the predictions "
                                "are for that instance type's nodes (their compute was measured there), not this "
                                "machine's",
                                session.id, session.instance_type, here));
  }
  const auto nominal = testbed_link_bps(session.instance_type);
  // The link as DDP's defaults see it (one flow on gloo): what --link is compared with.
  const tuner::LinkFit* defaults_fit = tuner::link_fit_for(model, CommConfig{});
  const double fitted_bps = defaults_fit ? defaults_fit->bytes_per_s * 8 : 0;
  if (!nominal && defaults_fit && vm.count("link")) {
    notes.push_back(fmt::format("the calibration link's nominal rate is unknown (not an acspeed-testbed instance "
                                "type): --link is compared with the rate the fit measured, {:.0f} Mbit/s",
                                fitted_bps / 1e6));
  }
  if (per_node != calibration_per_node || node_counts != std::vector<int>{static_cast<int>(session.nnodes)}) {
    notes.push_back("other node counts: each rank keeps its measured compute, each node its link; the wire bytes "
                    "follow ring allreduce (2(W-1)/W of the gradients over W ranks; hierarchical: over the nodes)");
  }

  // DDP's defaults first, then every other config the session measured in its search or decision.
  std::vector<std::pair<CommConfig, bool>> configs = {{CommConfig{}, true}};
  for (const auto& m : model.measured) {
    if (!m.config.is_default() && m.step_s > 0) configs.emplace_back(m.config, false);
  }
  std::vector<Row> rows;
  for (const auto& link : links) {
    const int64_t bps = link ? *link : nominal.value_or(static_cast<int64_t>(fitted_bps));
    const double scale = link ? static_cast<double>(*link) / (nominal ? static_cast<double>(*nominal) : fitted_bps) : 1.0;
    for (int nnodes : node_counts) {
      for (const auto& [config, baseline] : configs) {
        Row row{config, baseline, bps, nnodes, per_node, tuner::predict(model, config, {scale, nnodes, per_node}), {}};
        const auto* measured = tuner::find_measured(model, config);
        if (measured != nullptr && measured->step_s > 0 && scale == 1.0 && nnodes == session.nnodes &&
            per_node == calibration_per_node) {
          row.measured_s = measured->step_s;
        }
        rows.push_back(std::move(row));
      }
    }
  }
  const bool any = std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.prediction.ok; });
  if (!any) {
    ACS_THROW(Error, "session {} cannot be predicted: {}", session.id,
              rows.empty() ? "it measured nothing" : rows.front().prediction.why_not);
  }
  for (const auto& r : rows) {
    if (!r.prediction.ok) {
      notes.push_back(fmt::format("{} at {} node(s): not predicted: {}", r.config.describe(), r.nnodes, r.prediction.why_not));
    }
  }

  if (vm.count("json")) {
    json predictions = json::array();
    for (const auto& r : rows) {
      json p = {{"config", r.config},         {"baseline", r.baseline},     {"link_bits_per_s", r.link_bps},
                {"nnodes", r.nnodes},         {"nproc_per_node", r.nproc_per_node},
                {"step_s", nullptr},          {"bound_s", nullptr},         {"samples_per_s", nullptr}};
      if (r.prediction.ok) {
        p["step_s"] = r.prediction.step_s;
        p["bound_s"] = r.prediction.bound_s;
        p["comm_s"] = r.prediction.comm_s;
        p["wire_bytes"] = r.prediction.wire_bytes;
        p["flows"] = r.prediction.flows;
        p["cpu_floor_s"] = r.prediction.cpu_floor_s > 0 ? json(r.prediction.cpu_floor_s) : json(nullptr);
        p["samples_per_s"] = session.batch_size / r.prediction.step_s;
        p["efficiency"] = r.prediction.bound_s / r.prediction.step_s;
      } else {
        p["why_not"] = r.prediction.why_not;
      }
      if (r.measured_s) p["measured_s"] = *r.measured_s;
      predictions.push_back(std::move(p));
    }
    json calibration = {{"compute_s", model.compute_s.value_or(0)},
                        {"serial_s", model.serial_s.value_or(0)},
                        {"payload_bytes", model.payload_bytes.value_or(0)},
                        {"link_bits_per_s", nominal ? json(*nominal) : json(nullptr)}};
    if (defaults_fit) {
      calibration["fitted_bytes_per_s"] = defaults_fit->bytes_per_s;
      calibration["latency_s"] = defaults_fit->latency_s;
      calibration["latency_fitted"] = defaults_fit->latency_fitted;
      calibration["fit_samples"] = defaults_fit->samples;
    }
    calibration["links"] = links_json(model);
    const json out = {{"version", kPredictJsonVersion},
                      {"command_line", global.command_line},
                      {"settings", settings_in_environment()},
                      {"versions", {{"acspeed", ACSPEED_VERSION},
                                    {"session", json::parse(session.versions_json, nullptr, false)}}},
                      {"session", session.id},
                      {"instance_type", session.instance_type},
                      {"model", session.model_name},
                      {"precision", session.precision},
                      {"batch_size", session.batch_size},
                      {"calibration", calibration},
                      {"notes", notes},
                      {"predictions", predictions}};
    fmt::print("{}\n", out.dump(2));
    return kExitOk;
  }

  fmt::print("session {}: {} ({}) on {}, {} node(s) x {} rank(s), batch {} per device\n", session.id,
             session.model_name, session.precision, session.instance_type, session.nnodes, calibration_per_node,
             session.batch_size);
  if (model.compute_s && defaults_fit) {
    std::vector<std::string> per_flows;
    for (const auto& [flows, link] : model.links) {
      per_flows.push_back(fmt::format("{} flow(s) {:.0f} Mbit/s", flows, link.pooled.bytes_per_s * 8 / 1e6));
    }
    fmt::print("calibration: compute {} (forward + optimizer {}), link {:.0f} Mbit/s measured{}, latency {} per "
               "collective; per flow count: {}\n",
               tuner::format_seconds(*model.compute_s), tuner::format_seconds(model.serial_s.value_or(0)),
               fitted_bps / 1e6, nominal ? fmt::format(" on a {} link", format_rate(*nominal)) : "",
               tuner::format_seconds(defaults_fit->latency_s), fmt::join(per_flows, ", "));
  }
  Table table({"config", "flows", "link (Gbit/s)", "nodes", "ranks/node", "step (ms)", "bound (ms)", "efficiency",
               "CPU floor (ms)", "samples/s per device", "measured (ms)"});
  for (const auto& r : rows) {
    const auto& p = r.prediction;
    table.add({r.baseline ? "DDP defaults (baseline)" : r.config.describe(),
               std::to_string(tuner::flows_of(model, r.config, {1, r.nnodes, r.nproc_per_node})),
               fmt::format("{:g}", r.link_bps / 1e9),
               std::to_string(r.nnodes), std::to_string(r.nproc_per_node), p.ok ? ms(p.step_s) : "-",
               p.ok ? ms(p.bound_s) : "-", p.ok ? fmt::format("{:.0f}%", 100 * p.bound_s / p.step_s) : "-",
               p.ok && p.cpu_floor_s > 0 ? ms(p.cpu_floor_s) : "-",
               p.ok ? fmt::format("{:.1f}", session.batch_size / p.step_s) : "-",
               r.measured_s ? ms(*r.measured_s) : "-"});
  }
  table.print();
  for (const auto& note : notes) fmt::print("note: {}\n", note);
  return kExitOk;
}

}  // namespace acspeed::cli
