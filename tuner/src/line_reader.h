// Newline-framed messages on a stream socket (the JSON lines of protocol.h and node_link.h): bytes
// in as they arrive, whole lines out, and a bound on how long an unfinished line may grow.
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
#include <string>

namespace acspeed::tuner {

class LineReader {
 public:
  static constexpr size_t kUnbounded = std::numeric_limits<size_t>::max();
  explicit LineReader(size_t max_line = kUnbounded) : max_line_(max_line) {}

  // Appends what socket `fd` holds now, without waiting (recv with MSG_DONTWAIT until it would
  // block). False when the peer closed the connection or it failed: what it sent before is kept.
  bool fill(int fd);
  // The next whole line (without its newline), if one arrived.
  std::optional<std::string> next();
  // The unfinished line is longer than the bound: the peer is not speaking the protocol.
  bool overlong() const { return buffer_.size() > max_line_; }
  size_t max_line() const { return max_line_; }
  void clear() { buffer_.clear(); }

 private:
  size_t max_line_;
  std::string buffer_;  // what arrived, up to an unfinished line
};

}  // namespace acspeed::tuner
