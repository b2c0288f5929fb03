#include "config_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "acspeed/error.h"

namespace acspeed {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

struct Fd {
  int fd;
  ~Fd() { ::close(fd); }
};

}  // namespace

std::string read_config_file(const std::string& path) {
  // O_NONBLOCK: a FIFO opens at once even without a writer; fstat then refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) ACS_THROW(InvalidArgument, "ACSPEED_CONFIG={}: cannot read the file ({})", path, std::strerror(errno));
  const Fd closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ACS_THROW(InvalidArgument, "ACSPEED_CONFIG={}: cannot read the file ({})", path, std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    ACS_THROW(InvalidArgument, "ACSPEED_CONFIG={} is {} (accepted: a config or decisions JSON file)", path,
              kind_of(st.st_mode));
  }
  const auto too_big = [&] {
    ACS_THROW(InvalidArgument,
              "ACSPEED_CONFIG={}: the file holds more than {} MiB (accepted: a config or decisions JSON file, "
              "a few KiB)",
              path, kMaxConfigFileBytes >> 20);
  };
  if (st.st_size > kMaxConfigFileBytes) too_big();
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) ACS_THROW(InvalidArgument, "ACSPEED_CONFIG={}: cannot read the file ({})", path, std::strerror(errno));
    if (got == 0) break;
    text.append(buffer, static_cast<size_t>(got));
    if (static_cast<int64_t>(text.size()) > kMaxConfigFileBytes) too_big();  // it grew while read
  }
  return text;
}

}  // namespace acspeed
