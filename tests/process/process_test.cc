#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "acspeed/process/exit_status.h"
#include "acspeed/process/run.h"
#include "acspeed/process/signals.h"
#include "acspeed/process/spawn.h"
#include "acspeed/process/supervise.h"

namespace acspeed::process {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Process, RunFeedsStdinAndCapturesOutput) {
  const std::string big(300 * 1024, 'x');  // larger than a pipe buffer: no deadlock
  const RunResult result = run({{"cat"}, big});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.output, big);
}

TEST(Process, CheckedRunErrorNamesTheCommandAndItsOutput) {
  try {
    RunOptions options{{"sh", "-c", "echo no such device >&2; exit 3"}};
    options.check = true;
    run(options);
    ADD_FAILURE() << "a failing tool did not throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("sh -c"), std::string::npos) << what;
    EXPECT_NE(what.find("exit code 3"), std::string::npos) << what;
    EXPECT_NE(what.find("no such device"), std::string::npos) << what;
  }
  EXPECT_EQ(run({{"sh", "-c", "exit 4"}}).exit_code, 4);
  EXPECT_THROW(run({{"acspeed-no-such-tool"}}), Error);
}

TEST(Process, FindProgramLooksInSbinToo) {
  EXPECT_TRUE(find_program("sh").has_value());
  EXPECT_FALSE(find_program("acspeed-no-such-tool").has_value());
}

TEST(Process, SpawnedCommandSeesItsEnvironmentAndArgumentsVerbatim) {
  char path[] = "/tmp/acspeed-testbed-spawn-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  SpawnOptions options;
  // Arguments are passed as they are: no shell expands the `$HOME; *` in them.
  options.argv = {"sh", "-c", "printf '%s|%s|%s' \"$NODE_RANK\" \"$1\" \"$(cat /proc/self/stat | cut -d' ' -f5)\" > \"$2\"",
                  "sh", "$HOME; *", path};
  options.env = {{"NODE_RANK", "7"}};
  const pid_t pid = spawn(options);
  const auto result = supervise({pid}, {});
  EXPECT_EQ(result.exit_code(), 0);
  const std::string got = read_text(path);
  unlink(path);
  EXPECT_EQ(got.substr(0, got.rfind('|')), "7|$HOME; *");
  // Own process group (field 5 of /proc/self/stat of the shell is its pgid = its pid).
  EXPECT_EQ(got.substr(got.rfind('|') + 1), std::to_string(pid));
}

TEST(Process, SpawnReportsAMissingProgramAsAnError) {
  SpawnOptions options;
  options.argv = {"acspeed-no-such-program", "x"};
  try {
    spawn(options);
    ADD_FAILURE() << "spawned a missing program";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("acspeed-no-such-program"), std::string::npos) << e.what();
  }
  options.argv = {"true"};
  options.netns_path = "/nonexistent/netns";
  EXPECT_THROW(spawn(options), Error);
}

TEST(Process, AFailingNodeStopsTheOthers) {
  SpawnOptions fail, hang;
  fail.argv = {"sh", "-c", "exit 5"};
  hang.argv = {"sleep", "30"};
  const auto start = Clock::now();
  const auto result = supervise({spawn(fail), spawn(hang)}, {});
  EXPECT_LT(since(start), 10.0);
  EXPECT_EQ(result.exit_codes[0], 5);
  EXPECT_EQ(result.exit_codes[1], 128 + SIGTERM);
  EXPECT_EQ(result.exit_code(), 5);
}

TEST(Process, TimeoutStopsTheCommandsWithExitCode124) {
  SpawnOptions hang;
  hang.argv = {"sleep", "30"};
  SuperviseOptions options;
  options.timeout_s = 0.5;
  const auto start = Clock::now();
  const auto result = supervise({spawn(hang)}, options);
  EXPECT_LT(since(start), 10.0);
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.exit_code(), 124);
}

TEST(Process, CommandIgnoringSigtermIsKilledAfterTheGrace) {
  SpawnOptions stubborn;
  stubborn.argv = {"sh", "-c", "trap '' TERM; sleep 30 & wait; sleep 30"};
  SuperviseOptions options;
  options.timeout_s = 0.3;
  options.grace_s = 0.5;
  const auto start = Clock::now();
  const auto result = supervise({spawn(stubborn)}, options);
  EXPECT_LT(since(start), 10.0);
  EXPECT_EQ(result.exit_codes[0], 128 + SIGKILL);
}

// A folder of its own under /tmp, removed with what it holds.
class TempDir {
 public:
  TempDir() {
    char path[] = "/tmp/acspeed-process-test-XXXXXX";
    if (mkdtemp(path) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = path;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Whether `pid` is gone or a zombie (dead, not yet reaped by its parent), waiting up to `wait_s`.
bool ends_within(pid_t pid, double wait_s) {
  const auto start = Clock::now();
  for (;;) {
    const std::string stat = read_text(fmt::format("/proc/{}/stat", pid));
    const auto paren = stat.rfind(')');
    if (stat.empty() || (paren != std::string::npos && stat.substr(paren + 2, 1) == "Z")) return true;
    if (since(start) > wait_s) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// `sh -c 'sh -c INNER & wait'`: a shell that SIGTERM ends at once (as `sh -c 'acspeed-tune ...'`
// does), leaving INNER in its process group; INNER gets `$0` = arg0 and `$1` = arg1.
SpawnOptions shell_leaving(const std::string& inner, const std::string& arg0, const std::string& arg1) {
  SpawnOptions options;
  options.argv = {"sh", "-c", "sh -c \"$1\" \"$2\" \"$3\" & wait", "outer", inner, arg0, arg1};
  return options;
}

// Fails with exit code 5 once `ready` exists.
SpawnOptions failing_once(const std::string& ready) {
  SpawnOptions options;
  options.argv = {"sh", "-c", "while [ ! -e \"$0\" ]; do sleep 0.05; done; exit 5", ready};
  return options;
}

TEST(Process, WhatAStoppedCommandLeftInItsGroupGetsTheGracePeriodAndIsWaitedFor) {
  const TempDir dir;
  // The member handles SIGTERM for a second, then says so: it must not be SIGKILLed when its shell,
  // ended by the same SIGTERM, is reaped.
  const auto shell = shell_leaving("trap 'sleep 1; echo handled > \"$0\"; exit 0' TERM; sleep 30 & touch \"$1\"; wait",
                                   dir.file("handled"), dir.file("ready"));
  SuperviseOptions options;
  options.grace_s = 30;
  const auto start = Clock::now();
  const auto result = supervise({spawn(failing_once(dir.file("ready"))), spawn(shell)}, options);
  EXPECT_LT(since(start), 20.0);  // returned once the group was empty, not at the end of the grace
  EXPECT_EQ(result.exit_codes[0], 5);
  EXPECT_EQ(result.exit_codes[1], 128 + SIGTERM);  // the shell died at once
  EXPECT_EQ(read_text(dir.file("handled")), "handled\n");  // its member had its second, and was waited for
}

TEST(Process, WhatAStoppedCommandLeftIgnoringSigtermIsKilledWhenTheGracePeriodEnds) {
  const TempDir dir;
  const auto shell = shell_leaving("trap '' TERM; sleep 30 & echo \"$$ $!\" > \"$1\"; wait", "stubborn",
                                   dir.file("ready"));
  SuperviseOptions options;
  options.grace_s = 1;
  const auto start = Clock::now();
  const auto result = supervise({spawn(failing_once(dir.file("ready"))), spawn(shell)}, options);
  const double took = since(start);
  EXPECT_GE(took, 0.9);   // the members had the grace period
  EXPECT_LT(took, 10.0);  // and no more
  EXPECT_EQ(result.exit_codes[1], 128 + SIGTERM);
  std::istringstream pids(read_text(dir.file("ready")));
  pid_t member = 0, sleeper = 0;
  ASSERT_TRUE(pids >> member >> sleeper);
  EXPECT_TRUE(ends_within(member, 5)) << member;  // SIGKILLed as the grace period ended
  EXPECT_TRUE(ends_within(sleeper, 5)) << sleeper;
}

TEST(Process, AZombieInAStoppedGroupDoesNotHoldTheSupervisorPastTheGracePeriod) {
  SpawnOptions sleeper;
  sleeper.argv = {"sleep", "30"};
  const pid_t group = spawn(sleeper);
  // A child of ours that joins that group and exits: a zombie there until we reap it, so the
  // group never looks empty to kill().
  const pid_t zombie = fork();
  ASSERT_GE(zombie, 0);
  if (zombie == 0) _exit(setpgid(0, group) == 0 ? 0 : 1);
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(zombie), &info, WEXITED | WNOWAIT), 0);
  ASSERT_EQ(info.si_status, 0) << "the child could not join the group";
  SpawnOptions fail;
  fail.argv = {"sh", "-c", "exit 5"};
  SuperviseOptions options;
  options.grace_s = 2;
  const auto start = Clock::now();
  const auto result = supervise({spawn(fail), group}, options);
  const double took = since(start);
  EXPECT_GE(took, 1.9);   // the group was waited for
  EXPECT_LT(took, 10.0);  // until the SIGKILL, not forever
  EXPECT_EQ(result.exit_codes[1], 128 + SIGTERM);
  EXPECT_EQ(wait_exit(zombie), 0);
}

TEST(Process, InterruptionIsForwardedAndReported) {
  const SignalBlock block;
  SpawnOptions hang;
  hang.argv = {"sleep", "30"};
  const pid_t pid = spawn(hang);
  kill(getpid(), SIGTERM);  // blocked: waits, pending, for the supervisor
  const auto start = Clock::now();
  const auto result = supervise({pid}, {});
  EXPECT_LT(since(start), 10.0);
  EXPECT_EQ(result.interrupted_by, SIGTERM);
  EXPECT_EQ(result.exit_codes[0], 128 + SIGTERM);
  EXPECT_EQ(result.exit_code(), 128 + SIGTERM);
}

TEST(Process, PendingInterruptionIsRaisedBetweenSteps) {
  const SignalBlock block;
  EXPECT_NO_THROW(throw_if_interrupted());
  kill(getpid(), SIGINT);
  try {
    throw_if_interrupted();
    ADD_FAILURE() << "the pending SIGINT was not seen";
  } catch (const Interrupted& e) {
    EXPECT_EQ(e.signo(), SIGINT);
  }
  EXPECT_NO_THROW(throw_if_interrupted());  // consumed
}

TEST(Process, PinnedCommandRunsOnlyOnItsCpus) {
  SpawnOptions options;
  options.argv = {"sh", "-c", "grep Cpus_allowed_list /proc/self/status | grep -q '\\s0$'"};
  options.cpus = {0};
  EXPECT_EQ(supervise({spawn(options)}, {}).exit_code(), 0);
}

TEST(Process, RunKillsAProgramThatOutlivesItsTimeout) {
  RunOptions options{{"sh", "-c", "echo started; exec sleep 30"}};
  options.timeout = std::chrono::milliseconds(300);
  const auto start = Clock::now();
  const RunResult result = run(options);
  EXPECT_LT(since(start), 10.0);
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.exit_code, 128 + SIGKILL);
  EXPECT_EQ(result.output, "started\n");
  options.check = true;
  try {
    run(options);
    ADD_FAILURE() << "a timed-out checked run did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("timeout of 300 ms"), std::string::npos) << e.what();
  }
}

TEST(Process, RunCanLeaveStderrToTheCaller) {
  RunOptions options{{"sh", "-c", "echo out; echo err >&2"}};
  options.capture_stderr = false;
  EXPECT_EQ(run(options).output, "out\n");
  options.capture_stderr = true;
  EXPECT_EQ(run(options).output, "out\nerr\n");
}

TEST(Process, SpawnRedirectsOutputToTheGivenDescriptors) {
  char path[] = "/tmp/acspeed-process-log-XXXXXX";
  const int log = mkstemp(path);
  ASSERT_GE(log, 0);
  SpawnOptions options;
  options.argv = {"sh", "-c", "echo to-out; echo to-err >&2; cat"};
  options.stdout_fd = log;
  options.stderr_fd = log;
  options.stdin_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t pid = spawn(options);
  close(options.stdin_fd);
  close(log);
  EXPECT_EQ(wait_exit(pid), 0);  // cat ended at once: its stdin was /dev/null
  const std::string got = read_text(path);
  unlink(path);
  EXPECT_EQ(got, "to-out\nto-err\n");
}

TEST(Process, ChildGetsTheDefaultSignalMaskBack) {
  const SignalBlock block;  // blocked here, as in acspeed's programs
  SpawnOptions options;
  options.argv = {"sh", "-c", "grep -q '^SigBlk:\\s*0*$' /proc/self/status"};
  EXPECT_EQ(supervise({spawn(options)}, {}).exit_code(), 0);
}

TEST(Process, RunInChildReportsTheBodysExitCode) {
  EXPECT_EQ(run_in_child([] { return 0; }), 0);
  EXPECT_EQ(run_in_child([] { return 7; }), 7);
  EXPECT_EQ(run_in_child([] { return static_cast<int>(kill(getpid(), SIGKILL)); }), 128 + SIGKILL);
}

TEST(Process, ExitCodesAndTheirText) {
  EXPECT_EQ(describe_exit_code(3), "exit code 3");
  EXPECT_EQ(describe_exit_code(128 + SIGKILL), "signal 9 (SIGKILL: Killed)");
  SpawnOptions options;
  options.argv = {"sh", "-c", "kill -TERM $$"};
  const pid_t pid = spawn(options);
  EXPECT_EQ(wait_exit(pid), 128 + SIGTERM);
  EXPECT_EQ(poll_exit(pid), std::nullopt);  // reaped already
}

}  // namespace
}  // namespace acspeed::process
