#include "acspeed/process/signals.h"

#include <signal.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include <fmt/format.h>

namespace acspeed::process {
namespace {

sigset_t signal_set(bool with_sigchld) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
  if (with_sigchld) sigaddset(&set, SIGCHLD);
  return set;
}

timespec to_timespec(double seconds) {
  if (!(seconds > 0)) return {0, 0};
  const auto whole = static_cast<time_t>(seconds);
  return {whole, static_cast<long>((seconds - static_cast<double>(whole)) * 1e9)};
}

}  // namespace

Interrupted::Interrupted(int signo) : Error(fmt::format("interrupted by {}", strsignal(signo))), signo_(signo) {}

SignalBlock::SignalBlock() {
  const sigset_t set = signal_set(true);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

SignalBlock::~SignalBlock() {
  const sigset_t set = signal_set(true);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

void throw_if_interrupted() {
  const sigset_t set = signal_set(false);
  const timespec zero{0, 0};
  const int sig = sigtimedwait(&set, nullptr, &zero);
  if (sig > 0) throw Interrupted(sig);
}

int wait_for_signal(double seconds) {
  const sigset_t set = signal_set(true);
  const timespec ts = to_timespec(seconds);
  const int sig = sigtimedwait(&set, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

}  // namespace acspeed::process
