// acspeed-tune inflation COMPRESSED REFERENCE [--steps T] [--seed N] [--json]
// The convergence guard's loss check (tuner/include/acspeed/tuner/convergence_guard.h) and the step inflation
// (tuner/include/acspeed/tuner/inflation.h) on two loss curves the user recorded: the rule the tuner applies to its own
// trajectories, for any two runs on the same batches from the same weights, e.g. long runs with and
// without compression. Reads only.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "acspeed/error.h"
#include "acspeed/tuner/convergence_guard.h"
#include "acspeed/tuner/inflation.h"
#include "cli.h"

namespace acspeed::cli {
namespace {

inline constexpr int kInflationJsonVersion = 1;
inline constexpr const char* kCurveFormat = "a JSON array of numbers, or numbers separated by whitespace or commas";

// The losses in `path`: a JSON array of numbers, else numbers separated by whitespace or commas.
std::vector<double> read_curve(const std::string& role, const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    ACS_THROW(InvalidArgument, "{} curve '{}' cannot be read (expected a file holding {})", role, path, kCurveFormat);
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  std::vector<double> losses;
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') {
    const auto parsed = nlohmann::json::parse(text, nullptr, false);
    if (!parsed.is_array()) {
      ACS_THROW(InvalidArgument, "{} curve '{}' is not valid JSON (expected {})", role, path, kCurveFormat);
    }
    for (size_t i = 0; i < parsed.size(); ++i) {
      if (!parsed[i].is_number()) {
        ACS_THROW(InvalidArgument, "{} curve '{}': item {} is {}, not a number (expected {})", role, path, i,
                  parsed[i].dump(), kCurveFormat);
      }
      losses.push_back(parsed[i].get<double>());
    }
  } else {
    std::string token;
    std::istringstream words(text);
    while (words >> token) {
      std::istringstream items(token);
      std::string item;
      while (std::getline(items, item, ',')) {
        if (item.empty()) continue;
        size_t used = 0;
        double value = 0;
        try {
          value = std::stod(item, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != item.size()) {
          ACS_THROW(InvalidArgument, "{} curve '{}': item {} '{}' is not a number (expected {})", role, path,
                    losses.size(), item, kCurveFormat);
        }
        losses.push_back(value);
      }
    }
  }
  if (losses.empty()) {
    ACS_THROW(InvalidArgument, "{} curve '{}' holds no losses (expected {})", role, path, kCurveFormat);
  }
  return losses;
}

}  // namespace

int cmd_inflation(const GlobalOptions&, const std::vector<std::string>& args) {
  const std::string usage = "acspeed-tune inflation COMPRESSED REFERENCE [--steps T] [--seed N] [--json]";
  po::options_description options(
      "inflation options (each curve: the loss of every step, mean over ranks, the initial loss first; "
      "both runs on the same batches from the same initial weights)");
  options.add_options()("compressed", po::value<std::string>()->required(),
                        "file: the curve of the run that changes numerics (compression)")(
      "reference", po::value<std::string>()->required(), "file: the curve of the uncompressed run")(
      "steps", po::value<int>(), "compare the first T steps of each (default: the shorter curve's length)")(
      "seed", po::value<uint64_t>()->default_value(0), "the bootstrap's seed (acspeed-tune uses its session's)")(
      "json", "print JSON instead of text");
  po::positional_options_description positional;
  positional.add("compressed", 1).add("reference", 1);
  po::variables_map vm;
  if (!parse_args(usage, options, positional, args, vm)) return kExitOk;
  std::vector<double> compressed = read_curve("compressed", vm["compressed"].as<std::string>());
  std::vector<double> reference = read_curve("reference", vm["reference"].as<std::string>());
  const size_t available = std::min(compressed.size(), reference.size());
  size_t steps = available;
  if (vm.count("steps")) {
    const int asked = vm["steps"].as<int>();
    if (asked < 1 || static_cast<size_t>(asked) > available) {
      ACS_THROW(InvalidArgument, "--steps {} is not in 1..{} (the shorter curve's length)", asked, available);
    }
    steps = static_cast<size_t>(asked);
  }
  const size_t lengths[] = {compressed.size(), reference.size()};
  compressed.resize(steps);
  reference.resize(steps);

  tuner::InflationOptions inflation_options;
  inflation_options.seed = vm["seed"].as<uint64_t>();
  const tuner::Inflation inflation = tuner::measure_inflation(compressed, reference, inflation_options);
  const tuner::GuardThresholds thresholds;
  const tuner::LossCheck loss = tuner::check_loss_trajectory(compressed, reference, thresholds);
  if (vm.count("json")) {
    const nlohmann::json out = {
        {"version", kInflationJsonVersion},
        {"steps", steps},
        {"lengths", {{"compressed", lengths[0]}, {"reference", lengths[1]}}},
        {"inflation", inflation},
        {"loss_check", tuner::loss_evidence(loss, thresholds)}};
    fmt::print("{}\n", out.dump(2));
    return kExitOk;
  }
  fmt::print("steps compared: {} (compressed curve {}, reference {})\n", steps, lengths[0], lengths[1]);
  fmt::print("step inflation: {}\n", inflation.describe());
  if (inflation.kind == tuner::InflationKind::kMeasured) {
    fmt::print(
        "  target loss {:.4g} (the smoothed reference's at {:.0f}% of the steps): the reference reached it in "
        "{:.1f} steps, the compressed run in {:.1f}; smoothing {} steps, {} bootstrap resamples in blocks of {}\n",
        inflation.target, 100 * inflation_options.target_fraction, inflation.reference_steps, inflation.candidate_steps,
        inflation.smoothing_steps, inflation.resamples, inflation.block_steps);
  }
  const bool finite = std::all_of(compressed.begin(), compressed.end(), [](double v) { return std::isfinite(v); }) &&
                      std::all_of(reference.begin(), reference.end(), [](double v) { return std::isfinite(v); });
  fmt::print("loss check: {}: {}\n", loss.passed ? "passes" : "fails",
             finite ? tuner::describe(loss) : std::string("a loss is NaN/Inf"));
  return kExitOk;
}

}  // namespace acspeed::cli
