#include "progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

namespace acspeed::tuner {
namespace {

std::string clock_text(double seconds) {
  const auto s = static_cast<long>(std::max(0.0, seconds));
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

bool Progress::stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

Progress::Progress(std::chrono::seconds budget, bool live)
    : started_(std::chrono::steady_clock::now()), budget_(budget), live_(live) {
  if (live_) {
    ticker_ = std::thread([this] {
      while (!stop_) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          if (!what_.empty()) draw_locked();
        }
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
    });
  }
}

Progress::~Progress() {
  stop_ = true;
  if (ticker_.joinable()) ticker_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  if (live_) clear_locked();
}

void Progress::trial_started(int done, int total, const std::string& what) {
  std::lock_guard<std::mutex> lock(mutex_);
  done_ = done;
  total_ = std::max(total, done + 1);
  what_ = what;
  if (live_) draw_locked();
}

void Progress::trial_finished(const std::string& line, const std::string& best) {
  std::lock_guard<std::mutex> lock(mutex_);
  best_ = best;
  ++done_;
  what_.clear();  // the bar comes back with the next trial
  if (live_) clear_locked();
  fmt::print("{}\n", line);
  std::fflush(stdout);
}

void Progress::note(const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (live_) clear_locked();
  fmt::print("{}\n", line);
  std::fflush(stdout);
}

void Progress::clear_locked() { fmt::print(stderr, "\r\033[K"); }

void Progress::draw_locked() {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  const int width = 20;
  const int filled = total_ > 0 ? std::min(width, done_ * width / total_) : 0;
  // ETA: the mean time per finished trial times what is left, capped by the budget.
  double eta = done_ > 0 ? elapsed / done_ * (total_ - done_) : 0;
  if (budget_.count() > 0) eta = std::min(eta, static_cast<double>(budget_.count()) - elapsed);
  fmt::print(stderr, "\r\033[K[{}{}] {}/{}  {} elapsed, ETA {}  best: {}  now: {}", std::string(filled, '#'),
             std::string(width - filled, '.'), done_, total_, clock_text(elapsed), done_ > 0 ? clock_text(eta) : "?",
             best_.empty() ? "-" : best_, what_);
  std::fflush(stderr);
}

}  // namespace acspeed::tuner
