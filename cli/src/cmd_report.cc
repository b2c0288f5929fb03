// acspeed-tune report [--session ID | --latest] [--instance KEY] [--format md|json|csv|html] [-o FILE [--force]]
// One tuning session from the store as a report (see report.h). Reads only: a read-only store works.
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <fmt/format.h>

#include "acspeed/error.h"
#include "cli.h"
#include "acspeed/report/report.h"

namespace acspeed::cli {
namespace {

// Writes `text` to `file` through a temporary file in the same folder, so a failed write never
// leaves half a report behind (or half of an overwritten one).
void write_file(const std::string& file, const std::string& text) {
  const std::filesystem::path path(file);
  std::filesystem::path temp = path;
  temp += fmt::format(".tmp{}", static_cast<long>(::getpid()));
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(temp, ignored);
      ACS_THROW(Error, "cannot write {}", file);
    }
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::filesystem::remove(temp, ec);
    ACS_THROW(Error, "cannot write {}: {}", file, ec.message());
  }
}

}  // namespace

int cmd_report(const GlobalOptions& global, const std::vector<std::string>& args) {
  const std::string usage =
      "acspeed-tune report [--session ID | --latest] [--instance KEY] [--format md|json|csv|html] [-o FILE [--force]]";
  po::options_description options("report options");
  options.add_options()("session", po::value<std::string>(), "report this session ID (`acspeed-tune sessions`)")(
      "latest", "report the most recent session (the default)")(
      "instance", po::value<std::string>(), "only sessions tuned on this instance type")(
      "format", po::value<std::string>()->default_value("md"), "md|json|csv|html")(
      "output,o", po::value<std::string>(), "write to FILE instead of standard output")(
      "force", "overwrite an existing FILE");
  po::positional_options_description positional;
  po::variables_map vm;
  if (!parse_args(usage, options, positional, args, vm)) return kExitOk;

  report::RenderOptions render;
  render.format = report::parse_format(vm["format"].as<std::string>());
  render.command_line = global.command_line;
  if (vm.count("session") && vm.count("latest")) {
    ACS_THROW(InvalidArgument, "--session {} and --latest name different sessions: give one of them",
              vm["session"].as<std::string>());
  }
  if (vm.count("instance") && vm["instance"].as<std::string>().empty()) {
    ACS_THROW(InvalidArgument, "--instance '': an instance type key is not empty");
  }
  const std::string file = vm.count("output") ? vm["output"].as<std::string>() : "";
  if (vm.count("output") && file.empty()) ACS_THROW(InvalidArgument, "-o '': a file name is not empty");
  if (!file.empty() && std::filesystem::exists(file) && !vm.count("force")) {
    ACS_THROW(InvalidArgument, "{} exists; pass --force to overwrite it", file);
  }

  auto store = open_store(global, false);
  const SessionRecord session = pick_session(*store, vm);
  const std::string text = report::render_report(report::build_report(*store, session.id), render);
  if (file.empty()) {
    fmt::print("{}", text);
    return kExitOk;
  }
  write_file(file, text);
  fmt::print(stderr, "wrote the {} report of session {} to {}\n", report::to_string(render.format), session.id, file);
  return kExitOk;
}

}  // namespace acspeed::cli
