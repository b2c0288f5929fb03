// acspeed-tune report: not part of this build yet (reports land with their own issue).
#include <fmt/format.h>

#include "cli.h"

namespace acspeed::cli {

int cmd_report(const GlobalOptions&, const std::vector<std::string>&) {
  fmt::print(stderr, "acspeed-tune report: reports are not available in this build yet\n");
  return kExitFailure;
}

}  // namespace acspeed::cli
