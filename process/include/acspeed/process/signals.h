// Interruption of acspeed's programs (acspeed-tune, acspeed-testbed): SIGINT, SIGTERM and SIGHUP
// (and SIGCHLD, which wakes a supervisor) are blocked for the whole program (SignalBlock, first
// thing in main) and awaited with sigtimedwait, so an interruption is never lost between two steps
// and no handler runs at an awkward moment. Long waits call throw_if_interrupted() between steps;
// supervise() (supervise.h) waits for children and signals together. Children get the default
// signal mask back before exec (spawn.h).
#pragma once

#include "acspeed/error.h"

namespace acspeed::process {

// Raised between steps when SIGINT/SIGTERM/SIGHUP arrived; callers clean up and exit 128 + signo.
class Interrupted : public Error {
 public:
  explicit Interrupted(int signo);
  int signo() const { return signo_; }

 private:
  int signo_;
};

// Blocks the supervised signals (SIGINT, SIGTERM, SIGHUP, SIGCHLD) for its lifetime, in the
// calling thread and every thread it starts afterwards: create it first thing in main.
class SignalBlock {
 public:
  SignalBlock();
  ~SignalBlock();
  SignalBlock(const SignalBlock&) = delete;
  SignalBlock& operator=(const SignalBlock&) = delete;
};

// Consumes a pending SIGINT/SIGTERM/SIGHUP and throws Interrupted for it; returns at once otherwise.
void throw_if_interrupted();

// Waits up to `seconds` for one of the supervised signals; returns it, or 0 when none came.
int wait_for_signal(double seconds);

}  // namespace acspeed::process
