#include "progress.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

#include <fmt/format.h>

#include "acspeed/comm_methods.h"
#include "table.h"

namespace acspeed::cli {
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

void Progress::trial_finished(const tuner::TrialEvent& t) {
  std::string line = fmt::format("trial {:>3} {:<9} {:<44}", t.ordinal, to_string(t.role), t.label);
  if (t.status == TrialStatus::kOk) {
    line += fmt::format(" p50 {}  {:.1f}/s per device", tuner::format_seconds(t.metrics.p50_s), t.metrics.samples_per_s);
    if (t.metrics.exposed_comm_s) line += fmt::format("  exposed comm {}", tuner::format_seconds(*t.metrics.exposed_comm_s));
    if (t.metrics.compression_s) line += fmt::format("  {} compute {}", own_compute_names(false), tuner::format_seconds(*t.metrics.compression_s));
    if (t.bound_s && t.metrics.p50_s > 0) {
      line += fmt::format("  bound {} (efficiency {:.0f}%)", tuner::format_seconds(*t.bound_s),
                          100 * *t.bound_s / t.metrics.p50_s);
    }
  } else {
    std::string status(to_string(t.status));  // in capitals, to stand out among the trial lines
    std::transform(status.begin(), status.end(), status.begin(), [](unsigned char c) { return std::toupper(c); });
    line += fmt::format(" {}: {}", status, t.error);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  best_ = t.best_config ? fmt::format("{} ({})", tuner::format_seconds(t.best_cost_s), t.best_config->describe()) : "";
  ++done_;
  what_.clear();  // the bar comes back with the next trial
  print_locked(line);
}

void Progress::note(const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex_);
  print_locked(line);
}

void Progress::search_finished(const std::vector<tuner::SearchResult>& results) {
  Table table({"config", "p50 (s)", "p90 (s)", "samples/s per device", "exposed comm (s)", "bound (s)", "efficiency",
               "status"});
  for (const auto& r : results) {
    const bool ok = r.status == TrialStatus::kOk;
    const bool bounded = ok && r.bound_s && r.metrics.p50_s > 0;
    table.add({r.config.describe(), ok ? fmt::format("{:.4f}", r.metrics.p50_s) : "-",
               ok ? fmt::format("{:.4f}", r.metrics.p90_s) : "-",
               ok ? fmt::format("{:.1f}", r.metrics.samples_per_s) : "-",
               ok && r.metrics.exposed_comm_s ? fmt::format("{:.4f}", *r.metrics.exposed_comm_s) : "-",
               r.bound_s ? fmt::format("{:.4f}", *r.bound_s) : "-",
               bounded ? fmt::format("{:.0f}%", 100 * *r.bound_s / r.metrics.p50_s) : "-", std::string(to_string(r.status))});
  }
  std::lock_guard<std::mutex> lock(mutex_);
  print_locked("\nsearch results (step time = max over ranks per step; bound and efficiency = bound / p50 from the "
               "step model, `acspeed-tune predict`):");
  table.print();
  std::fflush(stdout);
}

void Progress::print_locked(const std::string& line) {
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

}  // namespace acspeed::cli
