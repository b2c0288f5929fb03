// acspeed-tune [--db PATH] [--log-level LEVEL] COMMAND ...
// `tune` is the command when options come without one: `acspeed-tune --model resnet50`.
#include <fmt/format.h>

#include "acspeed/error.h"
#include "acspeed/log.h"
#include "acspeed/process/signals.h"
#include "acspeed/python_interpreter.h"
#include "acspeed/settings.h"
#include "cli.h"

using namespace acspeed;
using namespace acspeed::cli;

namespace {

void print_usage() {
  fmt::print(
      "usage: acspeed-tune [--db PATH] [--log-level LEVEL] COMMAND [ARGS...]\n"
      "       acspeed-tune --model NAME [tune options...]      (same as `acspeed-tune tune ...`)\n\n"
      "Tunes PyTorch DDP communication for this instance type and stores the best configuration,\n"
      "which `import acspeed` then applies.\n\ncommands:\n");
  for (const auto& command : commands()) fmt::print("  {:<12} {}\n", command.name, command.summary);
  fmt::print(
      "\nglobal options:\n"
      "  --db PATH           store (default: $ACSPEED_DB, else $XDG_DATA_HOME/acspeed/acspeed.db)\n"
      "  --log-level LEVEL   debug|info|warn|error|off (default: $ACSPEED_LOG_LEVEL, else warn)\n"
      "  --version           print the version, and the torch and interpreter the workers run with\n"
      "  -h, --help          this help; `acspeed-tune COMMAND --help` for a command's options\n");
}

}  // namespace

int main(int argc, char** argv) {
  // Blocked from the start and awaited where the tuner waits: an interruption is never lost.
  const process::SignalBlock block;
  namespace po = boost::program_options;
  GlobalOptions global;
  for (int i = 0; i < argc; ++i) global.command_line.emplace_back(argv[i]);
  po::options_description options("global options");
  options.add_options()("help,h", "help")("version", "version")("db", po::value<std::string>(), "store")(
      "log-level", po::value<std::string>(), "log level")("command", po::value<std::string>(), "command")(
      "args", po::value<std::vector<std::string>>(), "command arguments");
  po::positional_options_description positional;
  positional.add("command", 1).add("args", -1);
  std::string command_name;
  std::vector<std::string> rest;
  po::variables_map vm;
  try {
    if (auto level = setting_string("ACSPEED_LOG_LEVEL")) set_log_level(parse_log_level(*level));
    auto parsed = po::command_line_parser(argc, argv)
                      .options(options)
                      .positional(positional)
                      .allow_unregistered()
                      .style(po::command_line_style::unix_style ^ po::command_line_style::allow_guessing)
                      .run();
    // --db and --log-level are global wherever they stand; other options before the command are
    // global, and the command and everything after it belong to the command. An unknown option
    // before any command starts `tune` (`acspeed-tune --model x`).
    po::parsed_options global_only(&options);
    for (const auto& option : parsed.options) {
      const bool always_global = option.string_key == "db" || option.string_key == "log-level";
      if (!command_name.empty() && !always_global) {
        rest.insert(rest.end(), option.original_tokens.begin(), option.original_tokens.end());
      } else if (option.unregistered) {
        command_name = "tune";
        rest.insert(rest.end(), option.original_tokens.begin(), option.original_tokens.end());
      } else if (option.string_key == "command") {
        command_name = option.value.front();
      } else {
        global_only.options.push_back(option);
      }
    }
    po::store(global_only, vm);
    if (vm.count("help")) {
      print_usage();
      return kExitOk;
    }
    if (vm.count("version")) {
      fmt::print("acspeed-tune {} (torch {}, {})\n", ACSPEED_VERSION, torch_version_of_python(), python_interpreter());
      return kExitOk;
    }
    if (vm.count("db")) global.db_path = vm["db"].as<std::string>();
    if (vm.count("log-level")) set_log_level(parse_log_level(vm["log-level"].as<std::string>()));
    if (command_name.empty()) {
      print_usage();
      return kExitUsage;
    }
  } catch (const po::error& e) {
    fmt::print(stderr, "acspeed-tune: error: {}\nTry 'acspeed-tune --help'.\n", e.what());
    return kExitUsage;
  } catch (const InvalidArgument& e) {
    fmt::print(stderr, "acspeed-tune: error: {}\nTry 'acspeed-tune --help'.\n", e.what());
    return kExitUsage;
  }
  for (const auto& command : commands()) {
    if (command.name != command_name) continue;
    try {
      return command.run(global, rest);
    } catch (const process::Interrupted& e) {
      fmt::print(stderr, "acspeed-tune {}: {}\n", command_name, e.what());
      return 128 + e.signo();
    } catch (const po::error& e) {
      fmt::print(stderr, "acspeed-tune {}: error: {}\nTry 'acspeed-tune {} --help'.\n", command_name, e.what(),
                 command_name);
      return kExitUsage;
    } catch (const InvalidArgument& e) {
      fmt::print(stderr, "acspeed-tune {}: error: {}\n", command_name, e.what());
      return kExitUsage;
    } catch (const Error& e) {
      fmt::print(stderr, "acspeed-tune {}: error: {}\n", command_name, e.what());
      return kExitFailure;
    } catch (const std::exception& e) {
      fmt::print(stderr, "acspeed-tune {}: internal error: {}\n", command_name, e.what());
      return kExitFailure;
    }
  }
  fmt::print(stderr, "acspeed-tune: error: unknown command '{}'\nTry 'acspeed-tune --help'.\n", command_name);
  return kExitUsage;
}
