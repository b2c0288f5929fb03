// acspeed-tune's view of a tuning session (the engine's SessionObserver): one plain line per trial
// and per note on stdout, the search results as one table, and on a terminal a live status line on
// stderr (bar, elapsed, ETA within the budget, the best so far), redrawn once a second while a
// trial runs. Plain lines only when stderr is not a terminal (logs, CI).
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "acspeed/tuner/session.h"

namespace acspeed::cli {

class Progress : public tuner::SessionObserver {
 public:
  // `budget`: the session's time budget (the ETA never passes it); `live`: draw the status line
  // (default: when stderr is a terminal).
  Progress(std::chrono::seconds budget, bool live);
  ~Progress() override;
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void trial_started(int done, int total, const std::string& what) override;
  // Prints the trial's line (and keeps the status line below it).
  void trial_finished(const tuner::TrialEvent& trial) override;
  void note(const std::string& line) override;
  // The results, fastest first, as one table.
  void search_finished(const std::vector<tuner::SearchResult>& results) override;

  static bool stderr_is_terminal();

 private:
  void draw_locked();
  void clear_locked();
  void print_locked(const std::string& line);

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

}  // namespace acspeed::cli
