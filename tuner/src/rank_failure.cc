#include "rank_failure.h"

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "acspeed/process/exit_status.h"
#include "worker_module.h"

namespace acspeed::tuner {
namespace {

constexpr size_t kTailLines = 6;
constexpr size_t kLineChars = 240;
constexpr std::streamoff kReadAtMost = 1 << 20;  // the end of a log is what tells

// The last kReadAtMost bytes of a file ("" when it cannot be read).
std::string read_end(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff start = std::max<std::streamoff>(0, size - kReadAtMost);
  in.seekg(start);
  std::string text(static_cast<size_t>(size - start), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return lines;
}

std::vector<std::string> tail_of(const std::string& text) {
  std::vector<std::string> tail;
  const auto lines = lines_of(text);
  for (auto it = lines.rbegin(); it != lines.rend() && tail.size() < kTailLines; ++it) {
    const auto first = it->find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    std::string line = it->substr(first);
    if (line.size() > kLineChars) line = line.substr(0, kLineChars) + "...";
    tail.push_back(std::move(line));
  }
  std::reverse(tail.begin(), tail.end());
  return tail;
}

// "rank 1", or "rank 1 (node 1)" in a session of several nodes.
std::string rank_name(const RankEvidence& r) {
  return r.node ? fmt::format("rank {} (node {})", r.rank, *r.node) : fmt::format("rank {}", r.rank);
}

std::string with_tail(std::string head, const RankEvidence& r) {
  if (r.log_tail.empty()) return head;
  return fmt::format("{}; last lines of its log: {} (log: {}{})", head, fmt::join(r.log_tail, " | "), r.log_path,
                     r.node ? fmt::format(" on node {}", *r.node) : "");
}

bool abnormal(int exit_code) { return exit_code != 0 && exit_code != 128 + SIGTERM; }

// "FUNC (FILE:LINE)" of a faulthandler frame line `File "PATH", line N in FUNC`; `in_library`:
// the frame is torch's or the interpreter's own (<frozen ...>), not the user's or acspeed's.
std::optional<std::string> frame_of(const std::string& line, bool* in_library) {
  static const std::regex frame(R"re(^\s*File "([^"]*)", line (\d+) in (\S+))re");
  std::smatch m;
  if (!std::regex_search(line, m, frame)) return std::nullopt;
  const std::string path = m[1];
  *in_library = path.find("/torch/") != std::string::npos || path.rfind("<", 0) == 0;
  return fmt::format("{} ({}:{})", m[3].str(), std::filesystem::path(path).filename().string(), m[2].str());
}

// The main thread's innermost frame in the last faulthandler dump of a log, and the innermost frame
// outside torch when that is another one: "barrier (distributed_c10d.py:4805) from forward (m.py:9)".
std::optional<std::string> where_in(const std::string& text) {
  const auto lines = lines_of(text);
  size_t dump = lines.size();
  for (size_t i = lines.size(); i-- > 0;) {
    if (lines[i].rfind("Timeout (", 0) == 0) {
      dump = i;
      break;
    }
  }
  if (dump == lines.size()) return std::nullopt;
  // Threads are blocks of frames after a "Thread 0x... (most recent call first):" header; the
  // worker's main thread is the one running the worker's module (worker_module.h).
  std::vector<std::vector<std::string>> threads;
  for (size_t i = dump + 1; i < lines.size(); ++i) {
    if (lines[i].find("(most recent call first)") != std::string::npos) {
      threads.emplace_back();
    } else if (!threads.empty() && lines[i].find("File \"") != std::string::npos) {
      threads.back().push_back(lines[i]);
    } else if (!threads.empty() && !lines[i].empty() && lines[i][0] != ' ') {
      break;  // the dump ended
    }
  }
  // A deep stack is cut at faulthandler's 100 frames, so the worker's own frame may be missing:
  // then the only thread, or the first.
  const std::string worker_file = "/" + worker_source_file() + "\"";
  auto main_thread = std::find_if(threads.begin(), threads.end(), [&](const std::vector<std::string>& frames) {
    return std::any_of(frames.begin(), frames.end(),
                       [&](const std::string& f) { return f.find(worker_file) != std::string::npos; });
  });
  if (main_thread == threads.end()) main_thread = threads.begin();
  if (main_thread == threads.end() || main_thread->empty()) return std::nullopt;
  const auto& frames = *main_thread;
  bool in_library = false;
  const auto innermost = frame_of(frames.front(), &in_library);
  if (!innermost || !in_library) return innermost;
  for (const auto& f : frames) {
    if (const auto own = frame_of(f, &in_library); own && !in_library) return fmt::format("{} from {}", *innermost, *own);
  }
  return innermost;
}

}  // namespace

std::map<int, int> torchrun_exit_codes(std::string_view launcher_output) {
  static const std::regex entry(R"(rank\s*:\s*(\d+)\s*\(local_rank:\s*\d+\)\s*exitcode\s*:\s*(-?\d+))");
  std::map<int, int> codes;
  const std::string text(launcher_output);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), entry); it != std::sregex_iterator(); ++it) {
    const int rank = std::stoi((*it)[1].str());
    const int code = std::stoi((*it)[2].str());
    codes[rank] = code < 0 ? 128 - code : code;
  }
  return codes;
}

std::vector<RankEvidence> gather_rank_evidence(const std::string& log_prefix, const std::string& launcher_log,
                                               std::optional<int> launcher_exit_code) {
  std::map<int, RankEvidence> ranks;
  for (const auto& [rank, code] : torchrun_exit_codes(read_end(launcher_log))) {
    ranks[rank].rank = rank;
    ranks[rank].exit_code = code;
  }
  const std::filesystem::path prefix(log_prefix);
  const std::string stem = prefix.filename().string() + "-rank";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(prefix.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(stem, 0) != 0 || name.size() <= stem.size() + 4 || name.substr(name.size() - 4) != ".log") continue;
    const std::string number = name.substr(stem.size(), name.size() - stem.size() - 4);
    if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos || number.size() > 6) continue;
    const int rank = std::stoi(number);
    RankEvidence& r = ranks[rank];
    r.rank = rank;
    r.log_path = entry.path().string();
    const std::string log = read_end(r.log_path);
    r.log_tail = tail_of(log);
    r.stack = where_in(log);
    const std::string record = read_end(fmt::format("{}-rank{}.failed.json", log_prefix, rank));
    if (record.empty()) continue;
    try {
      const auto j = nlohmann::json::parse(record);
      r.error = j.at("error").get<std::string>();
      r.caught_at_s = j.at("monotonic_s").get<double>();
    } catch (const nlohmann::json::exception&) {
      r.error = "(an unreadable error record)";
    }
  }
  std::vector<RankEvidence> out;
  for (auto& [rank, r] : ranks) {
    if (!r.exit_code) r.launcher_exit_code = launcher_exit_code;
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<std::string> explain_rank_failure(const std::vector<RankEvidence>& ranks) {
  for (const auto& r : ranks) {
    if (r.exit_code && abnormal(*r.exit_code) && !r.error) {
      return with_tail(fmt::format("{} ended with {} without reporting an error", rank_name(r),
                                   process::describe_exit_code(*r.exit_code)),
                       r);
    }
  }
  // A launcher ended by a signal takes its ranks with it (their parent-death signal): no table, no error.
  for (const auto& r : ranks) {
    if (!r.exit_code && r.launcher_exit_code && *r.launcher_exit_code > 128 && !r.error) {
      return with_tail(fmt::format("{} went down with its launcher (torchrun), which ended with {}", rank_name(r),
                                   process::describe_exit_code(*r.launcher_exit_code)),
                       r);
    }
  }
  const RankEvidence* first = nullptr;
  for (const auto& r : ranks) {
    if (r.error && (first == nullptr || r.caught_at_s < first->caught_at_s)) first = &r;
  }
  if (first == nullptr) return std::nullopt;
  return with_tail(fmt::format("{} failed: {}", rank_name(*first), *first->error), *first);
}

std::string where_ranks_were(const std::vector<RankEvidence>& ranks) {
  std::vector<std::string> places;
  for (const auto& r : ranks) {
    if (r.log_path.empty()) continue;
    places.push_back(fmt::format("{} {}", rank_name(r), r.stack ? "in " + *r.stack : "left no stack dump"));
  }
  return fmt::format("{}", fmt::join(places, "; "));
}

std::string rank_logs(const std::vector<RankEvidence>& ranks) {
  static const std::regex rank_log(R"(-rank\d+\.log$)");
  std::vector<std::string> places;
  for (const auto& r : ranks) {
    if (r.log_path.empty()) continue;
    std::string place = std::regex_replace(r.log_path, rank_log, "-rank*.log");
    if (r.node) place += fmt::format(" on node {}", *r.node);
    if (std::find(places.begin(), places.end(), place) == places.end()) places.push_back(std::move(place));
  }
  return fmt::format("{}", fmt::join(places, ", "));
}

}  // namespace acspeed::tuner
