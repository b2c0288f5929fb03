// Progress of a tuning session: one plain line per trial on stdout, and on a terminal a live
// status line on stderr (bar, elapsed, ETA within the budget, the best so far), redrawn once a
// second while a trial runs. Plain lines only when stderr is not a terminal (logs, CI).
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

namespace acspeed::tuner {

class Progress {
 public:
  // `budget`: the session's time budget (the ETA never passes it); `live`: draw the status line
  // (default: when stderr is a terminal).
  Progress(std::chrono::seconds budget, bool live);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `done` trials finished of about `total` planned; `what` is the trial about to run.
  void trial_started(int done, int total, const std::string& what);
  // Prints the trial's line (and keeps the status line below it).
  void trial_finished(const std::string& line, const std::string& best);
  // Prints a line that is not a trial (phase changes, notes).
  void note(const std::string& line);

  static bool stderr_is_terminal();

 private:
  void draw_locked();
  void clear_locked();

  const std::chrono::steady_clock::time_point started_;
  const std::chrono::seconds budget_;
  const bool live_;
  std::mutex mutex_;
  int done_ = 0;
  int total_ = 0;
  std::string what_;
  std::string best_;
  std::atomic<bool> stop_{false};
  std::thread ticker_;
};

}  // namespace acspeed::tuner
