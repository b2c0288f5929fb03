// What `import acspeed` applies to a DDP model, and why. Order:
//   ACSPEED_DISABLE=1                   -> nothing (DDP untouched)
//   ACSPEED_CONFIG=FILE                 -> that config, whatever instance type it was tuned on
//   store: exact key                    -> the active decision (the key includes whether the ranks
//                                          share GPUs: such decisions serve only such jobs)
//          same key, any precision      -> the most recent active decision for another precision
//          otherwise                    -> DDP defaults
// A decision tuned under another torch or NCCL major.minor, or that records no torch version, is not
// applied (re-tune); nor is one whose stored config is invalid (delete it). The pins
// ACSPEED_BUCKET_MB/_ALGORITHM/_STREAMS/_COMPRESSION are applied over whatever was chosen.
// Never throws: a problem (a bad file, an unreadable store, a bad NNODES...) is source kError with
// the reason, and DDP defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "acspeed/config.h"
#include "acspeed/store.h"

namespace acspeed {

struct ResolveRequest {
  DecisionKey key;            // precision may be empty (unknown): any precision matches;
                              // nnodes 0: node_count(world_size) from this job's environment
  std::string torch_version;  // of the job; empty = unknown (no version check)
  std::string nccl_version;   // empty or "unknown" = no NCCL check (CPU jobs)
  std::string store_path;     // empty = default_store_path()
};

enum class ResolveSource {
  kDisabled,
  kForced,
  kStored,
  kStoredOtherPrecision,
  kNoEntry,
  kVersionMismatch,
  kNoStore,
  kError,
};
std::string_view to_string(ResolveSource source);

struct Resolution {
  ResolveSource source = ResolveSource::kNoEntry;
  CommConfig config;               // what to apply (DDP defaults unless something applies)
  // True when config comes from a decision that changes something, a file or a pin.
  bool applied = false;
  // What was found, and applied when `applied`; otherwise why nothing is (the job says "no change
  // (message)", python/acspeed/decision.py; an error's message is its reason alone).
  std::string message;
  std::optional<Decision> decision;
  std::vector<std::string> warnings;  // e.g. unknown keys in ACSPEED_CONFIG
  std::vector<std::string> pinned;    // fields pinned by environment variables
};

Resolution resolve_config(const ResolveRequest& request);

}  // namespace acspeed
