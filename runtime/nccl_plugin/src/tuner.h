// The one implementation behind every exported NCCL tuner ABI version (plugin_v*.cc are thin
// adapters) and behind acspeed_nccl_tuner_set_rules. Every function is noexcept, returns success
// to NCCL whatever happens, and logs problems once through NCCL's logger.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl_tuner_common.h"

namespace acspeed::nccl_tuner {

// NCCL's init: remembers NCCL's logger, loads the rules on the first call (the file named by
// ACSPEED_NCCL_RULES, unless acspeed_nccl_tuner_set_rules came first) and creates the context.
// `abi_version` is the ABI NCCL loaded (the adapter's: 3 to 6); below 6 NCCL never asks for a chunk
// size, so a rule's chunk_bytes is ignored there (logged once per rule set).
acs_nccl_result_t init(int abi_version, acs_nccl_logger_t logger, uint64_t comm_id, size_t n_ranks,
                       size_t n_nodes, void** context) noexcept;

// NCCL's getCollInfo: applies the first rule matching (collective, n_bytes) to the cost table
// (a contiguous float[num_algo][num_proto], see tuner_rules.h) and sets *n_channels (0 when no
// rule matches or the rule leaves channels to NCCL).
acs_nccl_result_t get_coll_info(void* context, int collective, size_t n_bytes, float** cost_table,
                                int num_algo, int num_proto, int* n_channels) noexcept;

// NCCL's getChunkSize (ABI v6): sets *chunk_size to the chunk_bytes of the first rule matching
// (collective, n_bytes) when that rule has one and allows the algorithm and protocol NCCL chose;
// otherwise leaves *chunk_size as NCCL passed it.
acs_nccl_result_t get_chunk_size(void* context, int collective, size_t n_bytes, int algorithm, int protocol,
                                 int n_channels, size_t* chunk_size) noexcept;

// NCCL's finalize/destroy: frees the context.
acs_nccl_result_t finalize(void* context) noexcept;

// acspeed_nccl_tuner_set_rules (see include/acspeed/nccl_tuner_plugin.h).
int set_rules(const char* config_json) noexcept;

}  // namespace acspeed::nccl_tuner
