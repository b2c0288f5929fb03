// Supervising long-running children until they end, fail, time out or the user interrupts: the
// children were started with spawn() (each its own process group) and the program blocks its
// signals (SignalBlock), so one sigtimedwait() wakes on a child's end and on an interruption alike.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

namespace acspeed::process {

struct SuperviseOptions {
  std::string who = "acspeed";  // names this program in its notices: "acspeed-testbed: ..."
  double timeout_s = 0;         // 0 = none; on expiry the children are stopped and timed_out is set
  double grace_s = 10;          // after SIGTERM/SIGINT, how long before SIGKILL (children and their groups)
  bool stop_on_failure = true;  // a child exiting non-zero stops the others (a dead rank hangs the rest)
};

struct SuperviseResult {
  std::vector<int> exit_codes;  // per child (exit_status.h: 128 + signal when killed)
  int interrupted_by = 0;       // the signal that interrupted us, 0 when none
  bool timed_out = false;
  // 128 + signal when interrupted, 124 on timeout, else the first non-zero exit code, else 0.
  int exit_code() const;
};

// Waits for all children. An interruption (SIGINT/SIGTERM/SIGHUP) is forwarded to their process
// groups (a second one kills them). When a child ends on its own, whatever it left in its group is
// killed at once. While the children are being stopped (a failure, the timeout, an interruption),
// what a child that ended leaves in its group gets the same grace period as the rest (a program
// under `sh -c`, which that SIGTERM ends at once, can still clean up) and is waited for: we return
// once every group is empty, or when the grace period ends and everything left was SIGKILLed.
SuperviseResult supervise(const std::vector<pid_t>& children, const SuperviseOptions& options);

// Writes text and a newline to stderr; never throws (when whoever started us has gone and stderr
// is a closed pipe, a teardown must still finish).
void notice(std::string_view text);

}  // namespace acspeed::process
