#include "acspeed/process/exit_status.h"

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace acspeed::process {

int exit_code_of_status(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

std::string describe_exit_code(int exit_code) {
  if (exit_code > 128 && exit_code < 128 + NSIG) {
    const int signo = exit_code - 128;
    const char* abbrev = sigabbrev_np(signo);
    if (abbrev == nullptr) return fmt::format("signal {} ({})", signo, strsignal(signo));
    return fmt::format("signal {} (SIG{}: {})", signo, abbrev, strsignal(signo));
  }
  return fmt::format("exit code {}", exit_code);
}

std::optional<int> poll_exit(pid_t pid) {
  int status = 0;
  pid_t got;
  do {
    got = waitpid(pid, &status, WNOHANG);
  } while (got < 0 && errno == EINTR);
  if (got != pid) return std::nullopt;
  return exit_code_of_status(status);
}

int wait_exit(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 1;
  }
  return exit_code_of_status(status);
}

}  // namespace acspeed::process
