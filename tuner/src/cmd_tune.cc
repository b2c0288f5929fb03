// acspeed-tune tune: not part of this build yet (the tuner lands with its own issue).
#include <fmt/format.h>

#include "cli.h"

namespace acspeed::cli {

int cmd_tune(const GlobalOptions&, const std::vector<std::string>&) {
  fmt::print(stderr, "acspeed-tune tune: tuning is not available in this build yet\n");
  return kExitFailure;
}

}  // namespace acspeed::cli
