// acspeed-testbed's command layer: one file per command (cmd_run.cc, cmd_up.cc, cmd_exec.cc,
// cmd_down.cc, cmd_status.cc), the pieces they share (commands.cc), and main.cc, which routes.
// A command gets the words before "--" that follow its name, the command line after "--" and the
// state folder; it returns the exit status (errors are exceptions, turned into statuses by main).
#pragma once

#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "acspeed/testbed/state.h"

namespace acspeed::testbed {

namespace po = boost::program_options;

inline constexpr int kExitUsage = 2;

struct CommandArgs {
  std::vector<std::string> words;    // the command's options and positionals (before "--")
  std::vector<std::string> command;  // after "--"
  std::string state_dir;
};

struct Command {
  std::string name;
  int (*run)(const CommandArgs& args);
};

// The commands in `acspeed-testbed --help` order.
const std::vector<Command>& commands();

int cmd_run(const CommandArgs& args);
int cmd_up(const CommandArgs& args);
int cmd_exec(const CommandArgs& args);
int cmd_down(const CommandArgs& args);
int cmd_status(const CommandArgs& args);

// Parses a command's words (adds --help, which prints the options and exits 0).
po::variables_map parse_command(const std::string& name, const std::vector<std::string>& words,
                                po::options_description& options,
                                const po::positional_options_description& positional);

// How commands run in nodes (run, exec).
struct LaunchOptions {
  bool pin = false;
  double timeout_s = 0;
  bool torchrun = false;
  std::string python;
};
void add_launch_options(po::options_description& options, LaunchOptions& launch_options);
// Starts the command in the given nodes and supervises it; returns its exit status.
int launch(const ClusterState& state, const std::vector<int>& ranks, const std::vector<std::string>& command,
           const LaunchOptions& options);

// The cluster's name, profile, master and node addresses, on stderr.
void print_cluster(const ClusterState& state);
// Prints each problem; 0 when there is none, else 1.
int report_problems(const std::vector<std::string>& problems);

}  // namespace acspeed::testbed
