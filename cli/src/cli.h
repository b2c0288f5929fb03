// acspeed-tune's command layer: global options, the command table, shared output helpers.
// A command is a function taking the global options and its own arguments; it parses those with
// Boost.Program_options and returns the process exit code (0 ok, 1 failure, 2 usage error).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "acspeed/job_versions.h"

namespace acspeed::cli {

namespace po = boost::program_options;

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

struct GlobalOptions {
  std::string db_path;  // --db, else ACSPEED_DB / default
  std::string argv0 = "acspeed-tune";
  std::vector<std::string> command_line;  // the whole command line, recorded in sessions and reports
};

struct Command {
  std::string name;
  std::string summary;
  std::function<int(const GlobalOptions&, const std::vector<std::string>&)> run;
};

// The commands in `acspeed-tune --help` order. Each lives in its own cmd_*.cc.
const std::vector<Command>& commands();

int cmd_tune(const GlobalOptions&, const std::vector<std::string>&);
int cmd_report(const GlobalOptions&, const std::vector<std::string>&);
int cmd_configs(const GlobalOptions&, const std::vector<std::string>&);
int cmd_explain(const GlobalOptions&, const std::vector<std::string>&);
int cmd_env(const GlobalOptions&, const std::vector<std::string>&);
int cmd_fingerprint(const GlobalOptions&, const std::vector<std::string>&);
int cmd_predict(const GlobalOptions&, const std::vector<std::string>&);
int cmd_inflation(const GlobalOptions&, const std::vector<std::string>&);
int cmd_sessions(const GlobalOptions&, const std::vector<std::string>&);

// Parses `args` against `options` (and positionals); --help prints usage and returns false with
// exit_code 0. Throws po::error on bad input (main turns it into a one-line error + usage).
bool parse_args(const std::string& usage, const po::options_description& options,
                const po::positional_options_description& positional, const std::vector<std::string>& args,
                po::variables_map& vm);

// What an ID names and the command that lists them, for messages.
struct IdKind {
  const char* noun;     // "decision"
  const char* listing;  // "acspeed-tune configs list"
};
inline constexpr IdKind kDecisionIds{"decision", "acspeed-tune configs list"};
inline constexpr IdKind kSessionIds{"session", "acspeed-tune sessions"};

// "give a decision ID (see `acspeed-tune configs list`)": what every missing, malformed or unknown ID
// answers with.
std::string give_id(const IdKind& kind);

// The ID option `name` holds (declared as a string option), empty when it is absent. Anything but a
// positive integer is an InvalidArgument naming it as given ("--session abc: ...", or "abc: ..." for
// a positional ID: `flag` ""), then give_id(kind).
std::optional<int64_t> id_option(const po::variables_map& vm, const std::string& name, const std::string& flag,
                                 const IdKind& kind);
// As id_option, and an absent ID is an InvalidArgument saying give_id(kind).
int64_t required_id(const po::variables_map& vm, const std::string& name, const std::string& flag,
                    const IdKind& kind);

// The torch version the recorded interpreter (ACSPEED_PYTHON) has, or "unknown"; never imports torch.
std::string torch_version_of_python();

// The versions `import acspeed` compares a decision with, as that interpreter's acspeed.versions
// reports them: torch, and torch's own NCCL and CUDA when torch can use CUDA ("" otherwise).
// "unknown" (no check) where the interpreter could not say; `problem` then says why.
// The versions the workers' torch reports (`python -m acspeed.versions`, job_versions.h), from the
// interpreter the workers run with; `problem` says why there are none. Imports torch: seconds.
struct PythonVersions {
  JobVersions versions;
  std::string problem;
};
PythonVersions job_versions_of_python();

}  // namespace acspeed::cli

#include <memory>

#include "acspeed/store.h"

namespace acspeed::cli {

// Opens the store named by --db (else ACSPEED_DB / the default). For reading it never creates or
// migrates anything and notes a read-only store on stderr; for writing a read-only store is an error.
std::unique_ptr<Store> open_store(const GlobalOptions& global, bool for_writing);

// The session named by --session ID, else the latest one (of --instance KEY when given); throws
// Error naming what the store holds when there is none.
SessionRecord pick_session(const Store& store, const po::variables_map& vm);

}  // namespace acspeed::cli
