// How many machines a job spans: part of the key decisions are stored and looked up under. One rule
// for the tuner (its workers report it in their hello) and for `import acspeed` (the lookup), so the
// key a decision is stored under is the key a training job asks for.
#pragma once

#include <cstdint>
#include <string_view>

namespace acspeed {

// NNODES, else torchrun's GROUP_WORLD_SIZE, else world_size / LOCAL_WORLD_SIZE, else 1. A variable
// that is set but is not an integer from 1 to the world size is an InvalidArgument naming it and
// its value (never silently skipped: the job would look up another key).
int64_t node_count(int64_t world_size);

// Throws InvalidArgument "`what` N must be between 1 and the world size W" unless 1 <= nnodes <= world_size.
void validate_node_count(int64_t nnodes, int64_t world_size, std::string_view what = "nnodes");

}  // namespace acspeed
