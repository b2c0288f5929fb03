#include "acspeed/node_count.h"

#include <cstdlib>
#include <optional>
#include <string>

#include "acspeed/error.h"
#include "acspeed/settings.h"

namespace acspeed {
namespace {

// The variable as an integer from 1 to `max`; nullopt when unset or empty.
std::optional<int64_t> counted(const char* name, int64_t max) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  try {
    return parse_int(name, text, 1, max);
  } catch (const InvalidArgument&) {
    ACS_THROW(InvalidArgument, "{}='{}' is not a count of 1 to {} (the world size): fix or unset it", name, text,
              max);
  }
}

}  // namespace

void validate_node_count(int64_t nnodes, int64_t world_size, std::string_view what) {
  if (world_size < 1) ACS_THROW(InvalidArgument, "world size {} must be at least 1", world_size);
  if (nnodes < 1 || nnodes > world_size) {
    ACS_THROW(InvalidArgument, "{} {} must be between 1 and the world size {}", what, nnodes, world_size);
  }
}

int64_t node_count(int64_t world_size) {
  validate_node_count(1, world_size);
  for (const char* name : {"NNODES", "GROUP_WORLD_SIZE"}) {
    if (auto n = counted(name, world_size)) return *n;
  }
  if (auto local = counted("LOCAL_WORLD_SIZE", world_size)) return std::max<int64_t>(1, world_size / *local);
  return 1;
}

}  // namespace acspeed
