// Starting programs. argv goes to execve as it is: no shell ever interprets user strings. Every
// child runs in its own process group (a signal to -pid reaches whatever it starts), gets the
// default signal mask and dispositions back (acspeed's programs block their signals, signals.h),
// and is sent `parent_death_signal` when this process dies, even by SIGKILL. Each step before exec
// is checked: a failing one is reported to the parent through a pipe and thrown as an Error naming
// the command and the step, so "not found" never looks like the program's own exit status.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace acspeed::process {

using Environment = std::vector<std::pair<std::string, std::string>>;

// Absolute path of an executable found in PATH, then /usr/sbin, /sbin, /usr/bin and /bin (where
// iproute2 lives); a name with a '/' is taken as a path. nullopt when absent.
std::optional<std::string> find_program(std::string_view name);

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0]: a path, or a name looked up with find_program
  Environment env;                // set over the inherited environment
  // Descriptors dup'ed onto the child's stdin, stdout and stderr; -1 = inherit ours.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int parent_death_signal = SIGTERM;  // sent to the child when this process dies; 0 = none
  std::string netns_path;  // a network namespace file (/run/netns/NAME) to enter; empty = stay
  std::vector<int> cpus;   // CPU affinity; empty = inherit
};

// Starts the command and returns its pid (= its process group id). Throws Error naming the command
// when it is not found, or when entering the namespace, setting the affinity or exec fails.
pid_t spawn(const SpawnOptions& options);

// Runs `body` in a forked child without exec and returns its exit code (exit_status.h). The body
// runs in a copy of a possibly multi-threaded process: async-signal-safe calls only (a syscall such
// as unshare() to test what the machine allows, without changing this process).
int run_in_child(int (*body)());

}  // namespace acspeed::process
