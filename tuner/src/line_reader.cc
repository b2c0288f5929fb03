#include "line_reader.h"

#include <cerrno>
#include <sys/socket.h>

namespace acspeed::tuner {

bool LineReader::fill(int fd) {
  for (;;) {
    char chunk[65536];
    const ssize_t n = recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);
    if (n > 0) {
      buffer_.append(chunk, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

std::optional<std::string> LineReader::next() {
  const size_t newline = buffer_.find('\n');
  if (newline == std::string::npos) return std::nullopt;
  std::string line = buffer_.substr(0, newline);
  buffer_.erase(0, newline + 1);
  return line;
}

}  // namespace acspeed::tuner
