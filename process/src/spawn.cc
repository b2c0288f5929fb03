#include "acspeed/process/spawn.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "acspeed/error.h"
#include "acspeed/process/exit_status.h"

extern char** environ;

namespace acspeed::process {
namespace {

enum ChildStep { kStepPdeath = 1, kStepNetns, kStepAffinity, kStepRedirect, kStepExec };

std::string_view step_name(int step) {
  switch (step) {
    case kStepPdeath: return "setting the parent-death signal";
    case kStepNetns: return "entering the network namespace";
    case kStepAffinity: return "setting the CPU affinity";
    case kStepRedirect: return "redirecting its input and output";
    default: return "starting it";
  }
}

// Child side: reports the failing step and errno through `fd`, then exits 127. Only
// async-signal-safe calls from here on.
[[noreturn]] void child_fail(int fd, int step) {
  const int data[2] = {step, errno};
  ssize_t ignored = write(fd, data, sizeof(data));
  (void)ignored;
  _exit(127);
}

void child_reset_signals() {
  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, nullptr);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE}) signal(sig, SIG_DFL);
}

// Parent side: the (step, errno) the child reported before exec, if any; throws for it.
void check_child_report(int fd, pid_t pid, const std::vector<std::string>& argv) {
  int data[2] = {0, 0};
  ssize_t got;
  do {
    got = read(fd, data, sizeof(data));
  } while (got < 0 && errno == EINTR);
  close(fd);
  if (got == static_cast<ssize_t>(sizeof(data))) {
    wait_exit(pid);
    ACS_THROW(Error, "cannot run '{}': {} failed: {}", fmt::join(argv, " "), step_name(data[0]),
              std::strerror(data[1]));
  }
}

struct CStrings {
  std::vector<std::string> storage;
  std::vector<char*> pointers;
  explicit CStrings(std::vector<std::string> values) : storage(std::move(values)) {
    for (auto& s : storage) pointers.push_back(s.data());
    pointers.push_back(nullptr);
  }
};

std::vector<std::string> merged_environment(const Environment& overrides) {
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

}  // namespace

std::optional<std::string> find_program(std::string_view name) {
  if (name.empty()) return std::nullopt;
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
    if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0) return path;
  }
  return std::nullopt;
}

pid_t spawn(const SpawnOptions& options) {
  ACS_ENFORCE(!options.argv.empty(), "spawn needs a command");
  const auto program = find_program(options.argv[0]);
  if (!program) {
    ACS_THROW(Error, "cannot run '{}': '{}' was not found (PATH, /usr/sbin, /sbin)", fmt::join(options.argv, " "),
              options.argv[0]);
  }
  // Everything the child needs is prepared before fork().
  CStrings args(options.argv);
  CStrings envp(merged_environment(options.env));
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int cpu : options.cpus) CPU_SET(cpu, &cpus);
  int report[2];
  ACS_ENFORCE(pipe2(report, O_CLOEXEC) == 0, "pipe: {}", std::strerror(errno));
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(report[0]);
    close(report[1]);
    ACS_THROW(Error, "cannot run '{}': fork: {}", fmt::join(options.argv, " "), std::strerror(errno));
  }
  if (pid == 0) {
    close(report[0]);
    child_reset_signals();
    setpgid(0, 0);
    if (options.parent_death_signal != 0) {
      if (prctl(PR_SET_PDEATHSIG, options.parent_death_signal) != 0) child_fail(report[1], kStepPdeath);
      if (getppid() != parent) _exit(128 + options.parent_death_signal);  // the parent died before prctl
    }
    if (!options.netns_path.empty()) {
      const int fd = open(options.netns_path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) child_fail(report[1], kStepNetns);
      close(fd);
    }
    if (!options.cpus.empty() && sched_setaffinity(0, sizeof(cpus), &cpus) != 0) {
      child_fail(report[1], kStepAffinity);
    }
    const int redirect[3] = {options.stdin_fd, options.stdout_fd, options.stderr_fd};
    for (int target = 0; target < 3; ++target) {
      if (redirect[target] >= 0 && dup2(redirect[target], target) < 0) child_fail(report[1], kStepRedirect);
    }
    execve(program->c_str(), args.pointers.data(), envp.pointers.data());
    child_fail(report[1], kStepExec);
  }
  setpgid(pid, pid);  // also here, so a signal sent to the group right away reaches it
  close(report[1]);
  check_child_report(report[0], pid, options.argv);
  return pid;
}

int run_in_child(int (*body)()) {
  const pid_t pid = fork();
  if (pid < 0) ACS_THROW(Error, "fork: {}", std::strerror(errno));
  if (pid == 0) _exit(body());
  return wait_exit(pid);
}

}  // namespace acspeed::process
