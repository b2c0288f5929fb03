#include "acspeed/process/run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "acspeed/error.h"
#include "acspeed/log.h"
#include "acspeed/process/exit_status.h"
#include "acspeed/process/spawn.h"

namespace acspeed::process {
namespace {

using Clock = std::chrono::steady_clock;

// Closes what it holds, once.
struct Fd {
  int fd = -1;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) close(fd);
    fd = -1;
  }
};

}  // namespace

RunResult run(const RunOptions& options) {
  ACS_ENFORCE(!options.argv.empty(), "run needs a command");
  ACS_DEBUG("running {}", fmt::join(options.argv, " "));
  int in_pipe[2], out_pipe[2];
  ACS_ENFORCE(pipe2(in_pipe, O_CLOEXEC) == 0, "pipe: {}", std::strerror(errno));
  Fd in_read{in_pipe[0]}, in_write{in_pipe[1]};
  ACS_ENFORCE(pipe2(out_pipe, O_CLOEXEC) == 0, "pipe: {}", std::strerror(errno));
  Fd out_read{out_pipe[0]}, out_write{out_pipe[1]};

  SpawnOptions spawn_options;
  spawn_options.argv = options.argv;
  spawn_options.env = options.env;
  spawn_options.stdin_fd = in_read.fd;
  spawn_options.stdout_fd = out_write.fd;
  spawn_options.stderr_fd = options.capture_stderr ? out_write.fd : -1;
  spawn_options.parent_death_signal = SIGKILL;
  const pid_t pid = spawn(spawn_options);
  in_read.reset();
  out_write.reset();

  // Non-blocking, so a write never waits for the program while its output fills the other pipe.
  fcntl(in_write.fd, F_SETFL, fcntl(in_write.fd, F_GETFL) | O_NONBLOCK);
  if (options.input.empty()) in_write.reset();
  RunResult result;
  size_t written = 0;
  const auto deadline = options.timeout.count() > 0 ? Clock::now() + options.timeout : Clock::time_point::max();
  for (;;) {
    int wait_ms = -1;
    if (deadline != Clock::time_point::max()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) {
        result.timed_out = true;
        kill(-pid, SIGKILL);
        break;
      }
      wait_ms = static_cast<int>(left);
    }
    pollfd fds[2] = {{out_read.fd, POLLIN, 0}, {in_write.fd, POLLOUT, 0}};
    const int ready = poll(fds, in_write.fd >= 0 ? 2 : 1, wait_ms);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    if (in_write.fd >= 0 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n = write(in_write.fd, options.input.data() + written, options.input.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      if ((n < 0 && errno != EAGAIN && errno != EINTR) || written == options.input.size()) in_write.reset();
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buffer[4096];
      const ssize_t n = read(out_read.fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      result.output.append(buffer, static_cast<size_t>(n));
    }
  }
  result.exit_code = wait_exit(pid);
  if (options.check && (result.timed_out || result.exit_code != 0)) {
    std::string shown = result.output;
    while (!shown.empty() && (shown.back() == '\n' || shown.back() == ' ')) shown.pop_back();
    ACS_THROW(Error, "'{}' failed with {}: {}", fmt::join(options.argv, " "),
              result.timed_out ? fmt::format("a timeout of {} ms", options.timeout.count())
                               : describe_exit_code(result.exit_code),
              shown.empty() ? "(no output)" : shown);
  }
  return result;
}

}  // namespace acspeed::process
