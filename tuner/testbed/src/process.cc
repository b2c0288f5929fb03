#include "acspeed/testbed/process.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "acspeed/log.h"

extern char** environ;

namespace acspeed::testbed {
namespace {

using Clock = std::chrono::steady_clock;

sigset_t supervised_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&set, sig);
  return set;
}

sigset_t interrupt_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
  return set;
}

std::string joined_argv(const std::vector<std::string>& argv) { return fmt::format("{}", fmt::join(argv, " ")); }

// Child side of a fork: restore signals, then report a failing step through `err_fd` as
// (step, errno) and exit 127. Only async-signal-safe calls from here on.
[[noreturn]] void child_fail(int err_fd, int step) {
  const int data[2] = {step, errno};
  ssize_t ignored = write(err_fd, data, sizeof(data));
  (void)ignored;
  _exit(127);
}

void child_reset_signals() {
  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, nullptr);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE}) signal(sig, SIG_DFL);
}

enum ChildStep { kStepNetns = 1, kStepAffinity = 2, kStepExec = 3, kStepPdeath = 4 };

std::string_view step_name(int step) {
  switch (step) {
    case kStepNetns: return "entering the network namespace";
    case kStepAffinity: return "setting the CPU affinity";
    case kStepPdeath: return "setting the parent-death signal";
    default: return "starting it";
  }
}

// Reads the (step, errno) a child reports before exec; throws when there is one.
void check_exec_report(int fd, pid_t pid, const std::vector<std::string>& argv) {
  int data[2] = {0, 0};
  ssize_t got;
  do {
    got = read(fd, data, sizeof(data));
  } while (got < 0 && errno == EINTR);
  close(fd);
  if (got == static_cast<ssize_t>(sizeof(data))) {
    int status = 0;
    waitpid(pid, &status, 0);
    ACS_THROW(Error, "cannot run '{}': {} failed: {}", joined_argv(argv), step_name(data[0]),
              std::strerror(data[1]));
  }
}

struct CArgs {
  std::vector<std::string> storage;
  std::vector<char*> ptrs;
  explicit CArgs(std::vector<std::string> values) : storage(std::move(values)) {
    for (auto& s : storage) ptrs.push_back(s.data());
    ptrs.push_back(nullptr);
  }
};

std::vector<std::string> merged_environment(const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [key, value] : overrides) env[key] = value;
  std::vector<std::string> out;
  for (const auto& [key, value] : env) out.push_back(key + "=" + value);
  return out;
}

double seconds_until(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

}  // namespace

Interrupted::Interrupted(int signo)
    : Error(fmt::format("interrupted by {}", strsignal(signo))), signo_(signo) {}

SignalBlock::SignalBlock() {
  const sigset_t set = supervised_signals();
  sigprocmask(SIG_BLOCK, &set, nullptr);
}

SignalBlock::~SignalBlock() {
  const sigset_t set = supervised_signals();
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
}

void throw_if_interrupted() {
  const sigset_t set = interrupt_signals();
  const timespec zero{0, 0};
  const int sig = sigtimedwait(&set, nullptr, &zero);
  if (sig > 0) throw Interrupted(sig);
}

std::optional<std::string> find_program(std::string_view name) {
  if (name.find('/') != std::string_view::npos) {
    if (access(std::string(name).c_str(), X_OK) == 0) return std::string(name);
    return std::nullopt;
  }
  std::string dirs = getenv("PATH") ? getenv("PATH") : "";
  dirs += ":/usr/sbin:/sbin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, end - start);
    start = end + 1;
    if (dir.empty()) continue;
    const std::string path = fmt::format("{}/{}", dir, name);
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0) {
      return path;
    }
  }
  return std::nullopt;
}

int exit_code_of_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

ToolResult run_tool(const std::vector<std::string>& argv, const std::string& input, bool check) {
  ACS_ENFORCE(!argv.empty(), "run_tool needs a command");
  const auto path = find_program(argv[0]);
  if (!path) {
    ACS_THROW(Error, "'{}' was not found in PATH, /usr/sbin or /sbin: install iproute2", argv[0]);
  }
  ACS_DEBUG("testbed: {}", joined_argv(argv));
  CArgs args(argv);
  int in_pipe[2], out_pipe[2], err_pipe[2];
  ACS_ENFORCE(pipe2(in_pipe, O_CLOEXEC) == 0 && pipe2(out_pipe, O_CLOEXEC) == 0 &&
                  pipe2(err_pipe, O_CLOEXEC) == 0,
              "pipe: {}", std::strerror(errno));
  const pid_t pid = fork();
  ACS_ENFORCE(pid >= 0, "fork: {}", std::strerror(errno));
  if (pid == 0) {
    child_reset_signals();
    dup2(in_pipe[0], 0);
    dup2(out_pipe[1], 1);
    dup2(out_pipe[1], 2);
    execv(path->c_str(), args.ptrs.data());
    child_fail(err_pipe[1], kStepExec);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  check_exec_report(err_pipe[0], pid, argv);
  // Feed stdin and drain stdout together, so neither side can fill a pipe and block the other.
  std::string output;
  size_t written = 0;
  int in_fd = in_pipe[1];
  // Non-blocking, so a write never waits for the tool while its output fills the other pipe.
  fcntl(in_fd, F_SETFL, fcntl(in_fd, F_GETFL) | O_NONBLOCK);
  if (input.empty()) {
    close(in_fd);
    in_fd = -1;
  }
  while (true) {
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {in_fd, POLLOUT, 0}};
    if (poll(fds, in_fd >= 0 ? 2 : 1, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (in_fd >= 0 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n = write(in_fd, input.data() + written, input.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      if ((n < 0 && errno != EAGAIN && errno != EINTR) || written == input.size()) {
        close(in_fd);
        in_fd = -1;
      }
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[4096];
      const ssize_t n = read(out_pipe[0], buf, sizeof(buf));
      if (n <= 0) break;
      output.append(buf, static_cast<size_t>(n));
    }
  }
  if (in_fd >= 0) close(in_fd);
  close(out_pipe[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ToolResult result{exit_code_of_status(status), std::move(output)};
  if (check && result.exit_code != 0) {
    std::string shown = result.output;
    while (!shown.empty() && (shown.back() == '\n' || shown.back() == ' ')) shown.pop_back();
    ACS_THROW(Error, "'{}' failed with exit code {}: {}", joined_argv(argv), result.exit_code,
              shown.empty() ? "(no output)" : shown);
  }
  return result;
}

pid_t spawn(const SpawnOptions& options) {
  ACS_ENFORCE(!options.argv.empty(), "spawn needs a command");
  CArgs args(options.argv);
  CArgs envp(merged_environment(options.env));
  // execvpe searches the PATH of the calling process; resolve here so the node's PATH is ours too.
  const std::string program = find_program(options.argv[0]).value_or(options.argv[0]);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int cpu : options.cpus) CPU_SET(cpu, &cpus);
  int err_pipe[2];
  ACS_ENFORCE(pipe2(err_pipe, O_CLOEXEC) == 0, "pipe: {}", std::strerror(errno));
  const pid_t parent = getpid();
  const pid_t pid = fork();
  ACS_ENFORCE(pid >= 0, "fork: {}", std::strerror(errno));
  if (pid == 0) {
    close(err_pipe[0]);
    child_reset_signals();
    setpgid(0, 0);
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) child_fail(err_pipe[1], kStepPdeath);
    if (getppid() != parent) _exit(128 + SIGTERM);  // the supervisor died before prctl
    if (!options.netns_path.empty()) {
      const int fd = open(options.netns_path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) child_fail(err_pipe[1], kStepNetns);
      close(fd);
    }
    if (!options.cpus.empty() && sched_setaffinity(0, sizeof(cpus), &cpus) != 0) {
      child_fail(err_pipe[1], kStepAffinity);
    }
    execve(program.c_str(), args.ptrs.data(), envp.ptrs.data());
    child_fail(err_pipe[1], kStepExec);
  }
  setpgid(pid, pid);  // also here, so a signal forwarded right away reaches the group
  close(err_pipe[1]);
  check_exec_report(err_pipe[0], pid, options.argv);
  return pid;
}

void notice(std::string_view text) {
  std::string line(text);
  line += '\n';
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

int SuperviseResult::exit_code() const {
  if (interrupted_by) return 128 + interrupted_by;
  if (timed_out) return 124;
  for (int code : exit_codes) {
    if (code != 0) return code;
  }
  return 0;
}

SuperviseResult supervise(const std::vector<pid_t>& children, const SuperviseOptions& options) {
  SuperviseResult result;
  result.exit_codes.assign(children.size(), -1);
  size_t running = children.size();
  const auto start = Clock::now();
  const auto deadline = options.timeout_s > 0
                            ? start + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(options.timeout_s))
                            : Clock::time_point::max();
  std::optional<Clock::time_point> kill_at;  // set once we started stopping the children
  bool killed = false;

  auto signal_all = [&](int sig) {
    for (size_t i = 0; i < children.size(); ++i) {
      if (result.exit_codes[i] < 0) kill(-children[i], sig);
    }
  };
  auto stop_all = [&](int sig, std::string_view why) {
    if (kill_at) return;
    notice(fmt::format("acspeed-testbed: {}: sending {} to the remaining {} command(s)", why, strsignal(sig),
                       running));
    signal_all(sig);
    kill_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(options.grace_s));
  };

  const sigset_t set = supervised_signals();
  while (running > 0) {
    // Reap whatever ended (one SIGCHLD may stand for several children).
    for (size_t i = 0; i < children.size(); ++i) {
      if (result.exit_codes[i] >= 0) continue;
      int status = 0;
      const pid_t got = waitpid(children[i], &status, WNOHANG);
      if (got != children[i]) continue;
      result.exit_codes[i] = exit_code_of_status(status);
      --running;
      // Whatever the command left in its group (workers of a launcher) goes with it.
      kill(-children[i], SIGKILL);
      if (result.exit_codes[i] != 0 && options.stop_on_failure && running > 0) {
        stop_all(SIGTERM, fmt::format("command {} exited with {}", i, result.exit_codes[i]));
      }
    }
    if (running == 0) break;
    if (!result.timed_out && Clock::now() >= deadline) {
      result.timed_out = true;
      stop_all(SIGTERM, fmt::format("timeout of {} s reached", options.timeout_s));
    }
    if (kill_at && !killed && Clock::now() >= *kill_at) {
      notice(fmt::format("acspeed-testbed: commands still running {} s after being stopped: killing them",
                         options.grace_s));
      signal_all(SIGKILL);
      killed = true;
    }
    double wait_s = 0.5;
    if (!result.timed_out) wait_s = std::min(wait_s, std::max(0.0, seconds_until(deadline)));
    if (kill_at && !killed) wait_s = std::min(wait_s, std::max(0.0, seconds_until(*kill_at)));
    const timespec ts{static_cast<time_t>(wait_s), static_cast<long>((wait_s - static_cast<time_t>(wait_s)) * 1e9)};
    const int sig = sigtimedwait(&set, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      if (result.interrupted_by && !killed) {
        notice("acspeed-testbed: interrupted again: killing the commands");
        signal_all(SIGKILL);
        killed = true;
      }
      if (!result.interrupted_by) result.interrupted_by = sig;
      stop_all(sig == SIGINT ? SIGINT : SIGTERM, fmt::format("interrupted by {}", strsignal(sig)));
    }
  }
  return result;
}

}  // namespace acspeed::testbed
