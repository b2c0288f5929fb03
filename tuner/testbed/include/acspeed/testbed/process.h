// Processes for the testbed: short iproute2 tools run to completion, and long commands started
// inside a node's network namespace (fork, setns, exec: `ip netns exec` without a shell) and
// supervised until they end, fail, time out or the user interrupts.
//
// SIGINT, SIGTERM, SIGHUP and SIGCHLD are blocked in acspeed-testbed (SignalBlock) and awaited
// with sigtimedwait, so an interruption is never lost between two steps; children get the default
// mask back before exec.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "acspeed/error.h"

namespace acspeed::testbed {

// Raised between steps when SIGINT/SIGTERM/SIGHUP arrived; callers tear down and exit 128+signo.
class Interrupted : public Error {
 public:
  explicit Interrupted(int signo);
  int signo() const { return signo_; }

 private:
  int signo_;
};

// Blocks the supervised signals for its lifetime (create it first thing in main).
class SignalBlock {
 public:
  SignalBlock();
  ~SignalBlock();
  SignalBlock(const SignalBlock&) = delete;
  SignalBlock& operator=(const SignalBlock&) = delete;
};

// Consumes a pending SIGINT/SIGTERM/SIGHUP and throws Interrupted for it.
void throw_if_interrupted();

// Absolute path of an executable found in PATH, then /usr/sbin and /sbin (where iproute2 lives);
// nullopt when absent.
std::optional<std::string> find_program(std::string_view name);

struct ToolResult {
  int exit_code = 0;   // 128 + signal when killed
  std::string output;  // stdout and stderr together
};

// Runs argv to completion with `input` on stdin. check=true throws Error naming the command and
// its output when it exits non-zero.
ToolResult run_tool(const std::vector<std::string>& argv, const std::string& input = {},
                    bool check = true);

struct SpawnOptions {
  std::vector<std::string> argv;                            // argv[0] looked up in PATH
  std::vector<std::pair<std::string, std::string>> env;     // set on top of the inherited environment
  std::string netns_path;  // a /run/netns/NAME to enter; empty = stay in this namespace
  std::vector<int> cpus;   // CPU affinity; empty = inherit
};

// Starts the command in its own process group (signals are forwarded to the group) with
// PR_SET_PDEATHSIG=SIGTERM. Throws Error naming the command when setns, affinity or exec fail.
pid_t spawn(const SpawnOptions& options);

struct SuperviseOptions {
  double timeout_s = 0;     // 0 = none; on expiry the commands are stopped and timed_out is set
  double grace_s = 10;      // after SIGTERM/SIGINT, how long before SIGKILL
  bool stop_on_failure = true;  // a command exiting non-zero stops the others (a dead rank hangs the rest)
};

struct SuperviseResult {
  std::vector<int> exit_codes;  // per child, 128 + signal when killed
  int interrupted_by = 0;       // the signal that interrupted us, 0 when none
  bool timed_out = false;
  // 128 + signal when interrupted, 124 on timeout, else the first non-zero exit code, else 0.
  int exit_code() const;
};

// Waits for all children; forwards an interruption to their process groups.
SuperviseResult supervise(const std::vector<pid_t>& children, const SuperviseOptions& options);

// Exit code of a waitpid status: the exit status, or 128 + the terminating signal.
int exit_code_of_status(int status);

// Writes text and a newline to stderr; never throws (when whoever started us has gone and stderr
// is a closed pipe, a teardown must still finish).
void notice(std::string_view text);

}  // namespace acspeed::testbed
