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
  kPinned,    // resolve_instance_knobs: an ACSPEED_* pin
  kDisagree,  // resolve_instance_knobs: the decisions disagree
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

// The knobs of the instance (tuner/include/acspeed/tuner/knobs.h's before_communicator ones: NCCL's
// sockets over TCP) that `import acspeed` sets at import time, before any communicator exists and
// before the model is known. Order:
//   ACSPEED_DISABLE=1      -> nothing
//   ACSPEED_NCCL_SOCKETS   -> that pin ("0": NCCL's choice)
//   ACSPEED_CONFIG=FILE    -> the file's config; a decisions document: its decisions for this node count
//   store                  -> the active decisions for (instance type, node count, GPU sharing), any
//                             model, precision and world size, that apply here (versions, valid config)
// Decisions that disagree (one says 2x4, another 4x4 or NCCL's choice) set nothing, and the message
// names them. The store is read first, and the instance fingerprinted only when an active decision for
// this node count sets such a knob (none does: nothing costs more than reading the store).
// Never throws: a problem is source kError with the reason, and nothing set.
struct InstanceKnobsRequest {
  std::string instance_type;  // empty: fingerprint() when needed (ACSPEED_INSTANCE_TYPE or the hardware)
  int64_t world_size = 1;     // for nnodes 0
  int64_t nnodes = 0;         // 0: node_count(world_size) from this job's environment
  bool gpus_shared = false;
  std::string torch_version;  // of the job, as ResolveRequest
  std::string nccl_version;
  std::string store_path;     // empty = default_store_path()
};

struct InstanceKnobs {
  ResolveSource source = ResolveSource::kNoEntry;
  std::optional<NcclSockets> nccl_sockets;  // nullopt: NCCL's choice
  // The variables to set (nccl_socket_variables), in order; empty: set nothing.
  std::vector<std::pair<std::string, std::string>> environment;
  std::string message;  // the line rank 0 logs; "" when there is nothing to say (no such decision)
  std::vector<int64_t> decision_ids;  // the decisions it came from (or that disagree)
};

InstanceKnobs resolve_instance_knobs(const InstanceKnobsRequest& request);

}  // namespace acspeed
