#include "acspeed/process/supervise.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "acspeed/process/exit_status.h"
#include "acspeed/process/signals.h"

namespace acspeed::process {
namespace {

using Clock = std::chrono::steady_clock;

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

double seconds_until(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

}  // namespace

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
  const auto deadline = options.timeout_s > 0 ? Clock::now() + seconds(options.timeout_s) : Clock::time_point::max();
  std::optional<Clock::time_point> kill_at;  // set once we started stopping the children
  bool killed = false;
  // The groups of children that ended while we were stopping them: what they left there (a tuner
  // under `sh -c`, which SIGTERM ends at once) gets the grace period too, and is waited for.
  std::vector<pid_t> lingering;

  auto signal_all = [&](int sig) {
    for (size_t i = 0; i < children.size(); ++i) {
      if (result.exit_codes[i] < 0) kill(-children[i], sig);
    }
    for (pid_t group : lingering) kill(-group, sig);
  };
  auto stop_all = [&](int sig, std::string_view why) {
    if (kill_at) return;
    notice(fmt::format("{}: {}: sending {} to the remaining {} command(s)", options.who, why, strsignal(sig),
                       running));
    signal_all(sig);
    kill_at = Clock::now() + seconds(options.grace_s);
  };
  // Once the SIGKILL went out, nothing is waited for: a zombie (an exited process its parent has not
  // reaped) still counts as a member of its group for kill(), and would hold us forever.
  auto waiting = [&] { return running > 0 || (!lingering.empty() && !killed); };

  while (waiting()) {
    // Reap whatever ended (one SIGCHLD may stand for several children).
    for (size_t i = 0; i < children.size(); ++i) {
      if (result.exit_codes[i] >= 0) continue;
      const auto code = poll_exit(children[i]);
      if (!code) continue;
      result.exit_codes[i] = *code;
      --running;
      if (kill_at && !killed) {
        lingering.push_back(children[i]);
      } else {
        // It ended on its own: whatever it left in its group (workers of a launcher) goes with it.
        kill(-children[i], SIGKILL);
      }
      if (*code != 0 && options.stop_on_failure && running > 0) {
        stop_all(SIGTERM, fmt::format("command {} exited with {}", i, *code));
      }
    }
    lingering.erase(std::remove_if(lingering.begin(), lingering.end(),
                                   [](pid_t group) { return kill(-group, 0) != 0 && errno == ESRCH; }),
                    lingering.end());
    if (!waiting()) break;
    if (!result.timed_out && Clock::now() >= deadline) {
      result.timed_out = true;
      stop_all(SIGTERM, fmt::format("timeout of {} s reached", options.timeout_s));
    }
    if (kill_at && !killed && Clock::now() >= *kill_at) {
      notice(fmt::format("{}: {} still running {} s after being stopped: killing them", options.who,
                         running > 0 ? "commands" : "processes the commands started", options.grace_s));
      signal_all(SIGKILL);
      killed = true;
      if (!waiting()) break;
    }
    // A lingering group's processes are not our children: no SIGCHLD tells when they end.
    double wait_s = lingering.empty() ? 0.5 : 0.1;
    if (!result.timed_out) wait_s = std::min(wait_s, std::max(0.0, seconds_until(deadline)));
    if (kill_at && !killed) wait_s = std::min(wait_s, std::max(0.0, seconds_until(*kill_at)));
    const int sig = wait_for_signal(wait_s);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      if (result.interrupted_by && !killed) {
        notice(fmt::format("{}: interrupted again: killing the commands", options.who));
        signal_all(SIGKILL);
        killed = true;
      }
      if (!result.interrupted_by) result.interrupted_by = sig;
      stop_all(sig == SIGINT ? SIGINT : SIGTERM, fmt::format("interrupted by {}", strsignal(sig)));
    }
  }
  return result;
}

}  // namespace acspeed::process
