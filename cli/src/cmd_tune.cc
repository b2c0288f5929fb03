// acspeed-tune tune (the default command): parses the options into tuner::TuneOptions, with this
// machine's defaults (tuner/include/acspeed/tuner/defaults.h: smaller on a CPU-only machine, announced), and runs the
// session (acspeed/tuner/session.h) with the progress display as its observer.
//
//   acspeed-tune --model resnet50 --precision amp --nproc-per-node 8 [--nnodes 2 --node-rank R
//                --master-addr HOST --master-port PORT] [search space, budget, strategy...]
//   acspeed-tune --resume SESSION        continues a session with the options it was started with
#include <filesystem>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "acspeed/error.h"
#include "acspeed/fingerprint.h"
#include "acspeed/gpu_sharing.h"
#include "acspeed/precision.h"
#include "acspeed/python_interpreter.h"
#include "acspeed/settings.h"
#include "acspeed/strings.h"
#include "acspeed/tuner/convergence_guard.h"
#include "acspeed/tuner/defaults.h"
#include "acspeed/tuner/knobs.h"
#include "acspeed/tuner/nccl_net.h"
#include "acspeed/tuner/session.h"
#include "acspeed/tuner/strategy.h"
#include "cli.h"
#include "progress.h"

namespace acspeed::cli {
namespace {

using tuner::TuneOptions;

std::string usage() {
  std::string knob_options;
  for (const auto& knob : tuner::knobs()) knob_options += fmt::format("[--{} LIST] ", knob.option);
  return fmt::format(
      "acspeed-tune [tune] --model NAME|pkg.module:name|path/to/file.py:name [--precision {}] [--nproc-per-node N] "
      "[--nnodes N --node-rank R --master-addr HOST --master-port PORT] [--batch-size N] [--image-size N] "
      "[--warmup N] [--steps N] [--repeats N] [--budget-minutes M] {}"
      "[--data pkg.module:function] [--trajectory-steps T] "
      "[--strategy auto|model|descent|grid] [--seed N] [--trial-timeout S] [--loss-tolerance X] [--share-gpus] [--dry-run]\n"
      "       acspeed-tune [tune] --resume SESSION [--budget-minutes M] [--dry-run]",
      join(precision_names(), "|"), knob_options);
}

po::options_description tune_options() {
  const auto& gpu = tuner::tune_defaults(true);
  const auto& cpu = tuner::tune_defaults(false);
  const auto both = [](const auto& g, const auto& c) { return fmt::format("default {}; {} without a GPU", g, c); };
  const std::string budget = cpu.budget_minutes > 0 ? fmt::format("default: none; {:g} without a GPU", cpu.budget_minutes)
                                                    : std::string("default: none");
  po::options_description o("tune options");
  o.add_options()
      ("model", po::value<std::string>(), "torchvision classification model (resnet50), or pkg.module:name or "
       "path/to/file.py:name (relative to this folder) where name is a torch.nn.Module class taking no arguments, "
       "a function returning a module, or a function returning (model, make_batch), make_batch(batch_size) "
       "returning (inputs, targets); without make_batch or --data the batch is (batch, 3, S, S) random images "
       "(S = --image-size) with integer targets over the output's last dimension")
      ("precision", po::value<std::string>(), fmt::format("{} (default fp32)", join(precision_names(), "|")).c_str())
      ("nproc-per-node", po::value<std::string>(), fmt::format("ranks per node (default: the GPUs, else {})",
                                                               cpu.nproc_per_node).c_str())
      ("nnodes", po::value<std::string>(), "nodes (default 1); run the same command on every node")
      ("node-rank", po::value<std::string>(), "this node's rank (default 0; node 0 coordinates and writes the store)")
      ("master-addr", po::value<std::string>(), "node 0's address (default 127.0.0.1)")
      ("master-port", po::value<std::string>(), "rendezvous port (default: a free port on one node, 29500 on several; "
       "there node 0 also listens on the next port for the other nodes' acspeed-tune)")
      ("batch-size", po::value<std::string>(), fmt::format("per-device batch ({})", both(gpu.batch_size, cpu.batch_size)).c_str())
      ("image-size", po::value<std::string>(), fmt::format("input image size for torchvision models ({})",
                                                           both(gpu.image_size, cpu.image_size)).c_str())
      ("warmup", po::value<std::string>(), fmt::format("untimed steps per trial ({})", both(gpu.warmup, cpu.warmup)).c_str())
      ("steps", po::value<std::string>(), fmt::format("timed steps per trial ({})", both(gpu.steps, cpu.steps)).c_str())
      ("repeats", po::value<std::string>(), fmt::format("alternated (candidate, DDP defaults) pairs in the decision, "
                                                        ">= 3 ({})", both(gpu.repeats, cpu.repeats)).c_str())
      ("budget-minutes", po::value<std::string>(), fmt::format("bound on the search and the decision, minutes; a compression that "
                                                               "changes numerics adds the convergence guard's own, {:g}x "
                                                               "it ({})", tuner::kGuardBudgetFactor, budget).c_str());
  for (const auto& knob : tuner::knobs()) o.add_options()(knob.option.c_str(), po::value<std::string>(), knob.help().c_str());
  o.add_options()
      ("data", po::value<std::string>(), "pkg.module:function or path/to/file.py:function, called on every rank as function(rank, world_size, "
       "batch_size) and returning an iterable of (inputs, targets) torch tensors (batch_size rows; targets: integer "
       "class indices, or floats of the model output's shape): the batches of the trials, the gradient-fidelity "
       "window and, with --compression, the convergence guard's trajectories (its first T items). Default: the "
       "model's make_batch, and synthetic batches with labels from a fixed random teacher for the trajectories")
      ("trajectory-steps", po::value<std::string>(), "compression: steps T of the convergence guard's loss "
       "trajectories, one compressed per numerics and one uncompressed, apart from the timed steps (default 120)")
      ("strategy", po::value<std::string>(), "auto (default: model for 5 or more configs, else grid), model, descent or grid")
      ("seed", po::value<std::string>(), "seed of the search, the guard's batches and the statistics (default: from the job, so the same command gets "
       "the same seed; stored)")
      ("trial-timeout", po::value<std::string>(), "seconds before a trial counts as hung (default 300)")
      ("loss-tolerance", po::value<std::string>(), "compression: allowed loss difference, relative to the larger of the final loss and the trial's progress from its first loss (default 0.05)")
      ("resume", po::value<std::string>(), "continue session SESSION with its stored options")
      ("share-gpus", "let more ranks than this node's GPUs share them (device = local rank mod GPUs, each rank its "
       "own NCCL host identity; also ACSPEED_SHARE_GPUS=1); the decision then applies only to jobs that share GPUs")
      ("dry-run", "print the plan, check --model and --data as the workers will (built once on the CPU, one "
       "batch through forward and loss; exit 2 when they cannot be used) and exit");
  return o;
}

std::string text_of(const po::variables_map& vm, const char* name) { return vm[name].as<std::string>(); }

int int_option(const po::variables_map& vm, const char* name, int fallback, int min_value, int max_value) {
  if (!vm.count(name)) return fallback;
  const std::string text = text_of(vm, name);
  try {
    return static_cast<int>(parse_int(std::string("--") + name, text, min_value, max_value));
  } catch (const InvalidArgument&) {
    ACS_THROW(InvalidArgument, "--{} '{}' is not accepted (accepted: integers {} to {})", name, text, min_value,
              max_value);
  }
}

double float_option(const po::variables_map& vm, const char* name, double fallback, double min_value,
                    double max_value) {
  if (!vm.count(name)) return fallback;
  const std::string text = text_of(vm, name);
  double value = 0;
  try {
    value = parse_float(std::string("--") + name, text);
  } catch (const InvalidArgument&) {
    value = -std::numeric_limits<double>::infinity();
  }
  if (!(value >= min_value && value <= max_value)) {
    ACS_THROW(InvalidArgument, "--{} '{}' is not accepted (accepted: numbers {:g} to {:g})", name, text, min_value,
              max_value);
  }
  return value;
}

// What the command line asks for.
struct TuneRequest {
  TuneOptions options;
  bool dry_run = false;
};

// Builds the request from `args`; nullopt when --help was printed.
std::optional<TuneRequest> parse_tune(const std::vector<std::string>& args) {
  po::variables_map vm;
  if (!parse_args(usage(), tune_options(), {}, args, vm)) return std::nullopt;
  const auto gpus = detect_gpus();
  const bool gpu = gpus.has_value() && gpus->count > 0;
  TuneRequest request{tuner::tune_options_for(gpu)};
  TuneOptions& o = request.options;
  o.args = args;
  o.python = python_interpreter();
  o.python_path = python_source_dir();
  o.start_dir = std::filesystem::current_path().string();
  request.dry_run = vm.count("dry-run") > 0;
  if (vm.count("resume")) {
    o.resume = id_option(vm, "resume", "--resume", kSessionIds);
    for (const auto& [name, value] : vm) {
      if (name != "resume" && name != "budget-minutes" && name != "dry-run") {
        ACS_THROW(InvalidArgument, "--resume takes the session's stored options; --{} cannot change them "
                  "(accepted with --resume: --budget-minutes, --dry-run)", name);
      }
    }
    o.budget_minutes = float_option(vm, "budget-minutes", 0, 0, 1e6);
    return request;
  }
  if (!vm.count("model")) {
    ACS_THROW(InvalidArgument, "--model is required (a torchvision model name, pkg.module:name or path/to/file.py:name)");
  }
  o.model = text_of(vm, "model");
  if (o.model.empty() || o.model.front() == '-') {
    ACS_THROW(InvalidArgument, "--model '{}' is not accepted (accepted: a torchvision model name, pkg.module:name or "
              "path/to/file.py:name)", o.model);
  }
  if (vm.count("precision")) o.precision = parse_precision(text_of(vm, "precision"), "--precision");
  o.nnodes = int_option(vm, "nnodes", 1, 1, 4096);
  o.node_rank = int_option(vm, "node-rank", 0, 0, o.nnodes - 1);
  o.nproc_per_node = int_option(vm, "nproc-per-node", o.nproc_per_node > 0 ? o.nproc_per_node : gpus->count, 1, 1024);
  o.share_gpus = vm.count("share-gpus") > 0 || setting_bool("ACSPEED_SHARE_GPUS");
  o.gpus = gpu ? gpus->count : 0;
  o.gpus_shared = gpus_shared(o.share_gpus, o.nproc_per_node, o.gpus);
  if (gpu && o.nproc_per_node > o.gpus && !o.share_gpus) {
    ACS_THROW(InvalidArgument, "--nproc-per-node {} is more than the {} GPU(s) of this node (accepted: at most {}, "
              "or --share-gpus to let ranks share GPUs; such a decision applies only to jobs that share GPUs)",
              o.nproc_per_node, o.gpus, o.gpus);
  }
  if (vm.count("master-addr")) o.master_addr = text_of(vm, "master-addr");
  // Several nodes: node 0 also listens on the next port, for the other nodes' acspeed-tune (the node link).
  o.master_port = int_option(vm, "master-port", o.nnodes > 1 ? 29500 : 0, 1, o.nnodes > 1 ? 65534 : 65535);
  if (o.nnodes > 1 && o.master_addr == "127.0.0.1" && !vm.count("master-addr")) {
    ACS_THROW(InvalidArgument, "--nnodes {} needs --master-addr (node 0's address, the same on every node)", o.nnodes);
  }
  o.batch_size = int_option(vm, "batch-size", o.batch_size, 1, 1 << 20);
  o.image_size = int_option(vm, "image-size", o.image_size, 8, 4096);
  o.warmup = int_option(vm, "warmup", o.warmup, 0, 100000);
  o.steps = int_option(vm, "steps", o.steps, 2, 100000);
  o.repeats = int_option(vm, "repeats", o.repeats, 3, 1000);
  o.budget_minutes = float_option(vm, "budget-minutes", o.budget_minutes, 0, 1e6);
  o.trial_timeout_s = int_option(vm, "trial-timeout", o.trial_timeout_s, 5, 86400);
  o.loss_tolerance = float_option(vm, "loss-tolerance", o.loss_tolerance, 0, 10);
  o.trajectory_steps = int_option(vm, "trajectory-steps", o.trajectory_steps, 12, 100000);
  if (vm.count("data")) {
    o.data = text_of(vm, "data");
    const auto colon = o.data.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == o.data.size() || o.data.front() == '-') {
      ACS_THROW(InvalidArgument, "--data '{}' is not accepted (accepted: pkg.module:function or path/to/file.py:function "
                "returning an iterable of (inputs, targets) for (rank, world_size, batch_size))", o.data);
    }
  }
  o.seed = vm.count("seed") ? static_cast<uint64_t>(int_option(vm, "seed", 0, 0, std::numeric_limits<int>::max()))
                            : tuner::default_seed(o);
  o.strategy = vm.count("strategy") ? text_of(vm, "strategy") : "auto";

  using namespace tuner;
  SearchSpace& s = o.space;
  const KnobContext context{o.nnodes, o.nnodes * o.nproc_per_node, gpu};
  for (const auto& knob : knobs()) {
    if (!vm.count(knob.option)) {
      if (knob.unset) knob.unset(s, context);
      continue;
    }
    if (knob.needs_gpu && !gpu) {
      std::vector<std::string> here;
      for (const auto& other : knobs()) {
        if (!other.needs_gpu) here.push_back("--" + other.option);
      }
      ACS_THROW(InvalidArgument, "--{} needs a GPU (NCCL); this machine has none (accepted here: {})", knob.option,
                fmt::join(here, ", "));
    }
    knob.parse(s, "--" + knob.option, text_of(vm, knob.option.c_str()));
  }
  o.compression_searched = vm.count("compression") > 0;
  apply_pins(s);
  // NCCL's sockets only where NCCL's net is Socket between nodes; the plan says why or why not.
  o.nccl_net = nccl_net();
  if (auto note = gate_nccl_sockets(s, o.nnodes, o.gpus_shared, o.nccl_net); !note.empty()) o.notes.push_back(note);
  resolve_strategy_name(o.strategy, s, o.nnodes);  // an unknown name is a usage error now, not after the launch
  if (searches_powersgd(s) && o.warmup < kDefaultPowerSgdStartStep + 2) {
    // Every trial warms up as long, so that loss trajectories compare step for step.
    o.notes.push_back(fmt::format("warm-up raised from {} to {} steps for every trial: PowerSGD starts at step {}, "
                                  "and timed steps must be compressed ones",
                                  o.warmup, kDefaultPowerSgdStartStep + 2, kDefaultPowerSgdStartStep));
    o.warmup = kDefaultPowerSgdStartStep + 2;
  }

  if (!gpu) {
    std::vector<std::string> shrunk;
    if (!vm.count("image-size")) shrunk.push_back(fmt::format("image size {}", o.image_size));
    if (!vm.count("batch-size")) shrunk.push_back(fmt::format("batch {}", o.batch_size));
    if (!vm.count("steps") || !vm.count("warmup")) shrunk.push_back(fmt::format("{}+{} steps", o.warmup, o.steps));
    if (!vm.count("repeats")) shrunk.push_back(fmt::format("{} decision pairs", o.repeats));
    if (!vm.count("bucket-mb") || !vm.count("streams")) shrunk.push_back("a smaller search space");
    if (!vm.count("budget-minutes")) shrunk.push_back(fmt::format("a {:g}-minute budget", o.budget_minutes));
    if (!shrunk.empty()) {
      o.notes.push_back(fmt::format("no GPU here: defaults shrunk to {} (give the options to change them)",
                                    fmt::join(shrunk, ", ")));
    }
  }
  return request;
}

void print_plan(const TuneOptions& options, const std::string& instance_type) {
  for (const auto& line : tuner::plan_lines(options, instance_type)) fmt::print("{}\n", line);
  std::fflush(stdout);
}

}  // namespace

int cmd_tune(const GlobalOptions& global, const std::vector<std::string>& args) {
  auto parsed = parse_tune(args);
  if (!parsed) return kExitOk;
  TuneOptions options = parsed->options;
  const bool dry_run = parsed->dry_run;
  if (options.resume) {
    // The session's own options, re-parsed; only the budget may change.
    const auto store = open_store(global, !dry_run);
    const auto session = store->session(*options.resume);
    if (!session) {
      ACS_THROW(InvalidArgument, "--resume {}: no such session in {}: {}", *options.resume, store->path(),
                give_id(kSessionIds));
    }
    if (session->status == SessionStatus::kDone) {
      ACS_THROW(InvalidArgument, "--resume {}: that session is already done (its decision is stored)", *options.resume);
    }
    const auto stored = nlohmann::json::parse(session->options_json, nullptr, false);
    if (!stored.is_object() || !stored.contains("args") || !stored["args"].is_array()) {
      ACS_THROW(Error, "--resume {}: the session has no stored options to resume with", *options.resume);
    }
    auto original = parse_tune(stored["args"].get<std::vector<std::string>>());
    original->options.seed = static_cast<uint64_t>(session->seed);
    original->options.resume = options.resume;
    original->options.args = stored["args"].get<std::vector<std::string>>();
    if (options.budget_minutes > 0) original->options.budget_minutes = options.budget_minutes;
    options = original->options;
  }
  options.command_line = global.command_line;
  if (dry_run) {
    print_plan(options, fingerprint().instance_type);
    fmt::print("{}\n", tuner::check_model(options));
    fmt::print("dry run: nothing launched under torchrun, nothing stored\n");
    return kExitOk;
  }
  Progress progress(std::chrono::seconds(static_cast<int64_t>(tuner::session_limit_minutes(options) * 60)),
                    Progress::stderr_is_terminal());
  if (options.node_rank > 0) {
    tuner::supervise_node(options, progress);
    return kExitOk;
  }
  print_plan(options, fingerprint().instance_type);
  auto store = open_store(global, true);  // a read-only store is refused before anything runs
  const auto result = tuner::run_session(options, *store, progress);
  using Status = tuner::SessionResult::Status;
  if (!result.error.empty()) fmt::print(stderr, "acspeed-tune tune: error: {}\n", result.error);
  if (result.status == Status::kInterrupted && result.session_id > 0) {
    fmt::print(stderr, "interrupted: {} trial(s) stored; continue with `acspeed-tune --resume {}`\n",
               result.trials_stored, result.session_id);
  }
  if (result.status == Status::kFailed && !result.usage_error && result.session_id > 0) {
    fmt::print(stderr, "session {} keeps what was stored before; once the cause is fixed, continue with "
                       "`acspeed-tune --resume {}`\n", result.session_id, result.session_id);
  }
  if (!result.kept_logs.empty()) fmt::print(stderr, "worker logs kept in {}\n", result.kept_logs);
  switch (result.status) {
    case Status::kDone: return kExitOk;
    case Status::kInterrupted: return 128 + result.signal;
    case Status::kFailed: return result.usage_error ? kExitUsage : kExitFailure;
  }
  return kExitFailure;
}

}  // namespace acspeed::cli
