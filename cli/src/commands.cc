#include "cli.h"

#include <charconv>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "acspeed/error.h"
#include "acspeed/process/run.h"
#include "acspeed/python_interpreter.h"

namespace acspeed::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"tune", "run profiled DDP trials and store the best configuration (the default command)", cmd_tune},
      {"report", "export a tuning session as Markdown, JSON, CSV or HTML", cmd_report},
      {"configs", "list|show|delete|activate|export|import stored decisions", cmd_configs},
      {"sessions", "the tuning sessions in the store: IDs for `report --session` and `--resume`", cmd_sessions},
      {"explain", "what `import acspeed` would apply here for a model, world size and node count, and why",
       cmd_explain},
      {"predict", "predicted step time and bound of a tuned session's configs on other link rates and node counts",
       cmd_predict},
      {"inflation", "the convergence guard's loss check and step inflation on two loss curves you recorded",
       cmd_inflation},
      {"env", "every ACSPEED_* setting with its default, current value and description", cmd_env},
      {"fingerprint", "this machine's instance-type key and the details stored beside it", cmd_fingerprint},
  };
  return table;
}

bool parse_args(const std::string& usage, const po::options_description& options,
                const po::positional_options_description& positional, const std::vector<std::string>& args,
                po::variables_map& vm) {
  po::options_description all;
  all.add(options);
  all.add_options()("help,h", "show this help");
  po::store(po::command_line_parser(args)
                .options(all)
                .positional(positional)
                .style(po::command_line_style::unix_style ^ po::command_line_style::allow_guessing)
                .run(),
            vm);
  if (vm.count("help")) {
    fmt::print("usage: {}\n\n", usage);
    std::ostringstream text;
    text << all;
    fmt::print("{}", text.str());
    return false;
  }
  po::notify(vm);
  return true;
}

std::string give_id(const IdKind& kind) { return fmt::format("give a {} ID (see `{}`)", kind.noun, kind.listing); }

std::optional<int64_t> id_option(const po::variables_map& vm, const std::string& name, const std::string& flag,
                                 const IdKind& kind) {
  if (!vm.count(name)) return std::nullopt;
  const std::string& text = vm[name].as<std::string>();
  int64_t id = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || id <= 0) {
    ACS_THROW(InvalidArgument, "{}{}{}: not a {} ID (a positive integer); {}", flag, flag.empty() ? "" : " ", text,
              kind.noun, give_id(kind));
  }
  return id;
}

int64_t required_id(const po::variables_map& vm, const std::string& name, const std::string& flag,
                    const IdKind& kind) {
  const auto id = id_option(vm, name, flag, kind);
  if (!id) ACS_THROW(InvalidArgument, "{}", give_id(kind));
  return *id;
}

std::string torch_version_of_python() {
  // No torch in that environment is an answer ("unknown"), not a traceback on the user's terminal.
  process::RunOptions options{{python_interpreter(), "-c",
                               "import importlib.metadata as m\n"
                               "try:\n    print(m.version('torch'))\n"
                               "except m.PackageNotFoundError:\n    raise SystemExit(1)"}};
  options.capture_stderr = false;
  options.timeout = std::chrono::seconds(20);
  process::RunResult result;
  try {
    result = process::run(options);
  } catch (const Error&) {
    return "unknown";  // the interpreter cannot be started
  }
  std::string version = result.output;
  while (!version.empty() && (version.back() == '\n' || version.back() == '\r')) version.pop_back();
  return result.exit_code == 0 && !result.timed_out && !version.empty() ? version : "unknown";
}

PythonVersions job_versions_of_python() {
  // The source folder goes in as an argument, so no path is ever spliced into the code.
  process::RunOptions options{{python_interpreter(), "-c",
                               "import sys\n"
                               "if sys.argv[1]: sys.path.insert(0, sys.argv[1])\n"
                               "from acspeed import versions\n"
                               "versions.main()",
                               python_source_dir()}};
  options.capture_stderr = false;
  options.timeout = std::chrono::seconds(60);
  process::RunResult result;
  result.exit_code = 127;
  try {
    result = process::run(options);
  } catch (const Error&) {
    // the interpreter cannot be started: exit 127 below
  }
  PythonVersions out;
  const auto parsed = nlohmann::json::parse(result.output, nullptr, false);
  if (result.exit_code != 0 || !parsed.is_object()) {
    out.problem = fmt::format("{} could not report torch's versions (exit {}{})", python_interpreter(),
                              result.exit_code, result.timed_out ? ", timed out" : "");
    return out;
  }
  out.versions = job_versions_from_json(parsed);
  return out;
}

}  // namespace acspeed::cli

namespace acspeed::cli {

std::unique_ptr<Store> open_store(const GlobalOptions& global, bool for_writing) {
  StoreOptions options;
  options.path = global.db_path;
  options.read_only = !for_writing;
  auto store = Store::open(options);
  if (for_writing && store->read_only()) {
    ACS_THROW(StoreError, "store {} is read-only ({}): refusing to write", store->path(), store->read_only_reason());
  }
  if (!for_writing && store->read_only() && store->read_only_reason() != "opened for reading") {
    fmt::print(stderr, "note: store {} is read-only ({}); reading only\n", store->path(), store->read_only_reason());
  }
  return store;
}

}  // namespace acspeed::cli
