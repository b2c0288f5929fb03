// ncclTunerPlugin_v6: the ABI NCCL 2.30 prefers: v5 plus getChunkSize.
#include <cstddef>

#include "acspeed/nccl_tuner_plugin.h"
#include "plugin_exports.h"
#include "tuner.h"

namespace {

// The layout NCCL 2.30 reads (tuner_v6.h): v5's three pointers after the name, then getChunkSize.
static_assert(offsetof(acs_nccl_tuner_v6_t, init) == 8 && offsetof(acs_nccl_tuner_v6_t, finalize) == 24 &&
              offsetof(acs_nccl_tuner_v6_t, get_chunk_size) == 32 && sizeof(acs_nccl_tuner_v6_t) == 40);

acs_nccl_result_t init_v6(void** context, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                          acs_nccl_logger_t logger, acs_nccl_nvl_domain_info_v6_t* /*nvl_domain_info*/,
                          acs_nccl_tuner_constants_v6_t* /*constants: NCCL's, left as they are*/) noexcept {
  return acspeed::nccl_tuner::init(6, logger, comm_id, n_ranks, n_nodes, context);
}

acs_nccl_result_t get_coll_info_v6(void* context, acs_nccl_func_t coll_type, size_t n_bytes,
                                   int /*num_pipe_ops*/, float** cost_table, int num_algo, int num_proto,
                                   int /*reg_buff*/, int* n_channels) noexcept {
  return acspeed::nccl_tuner::get_coll_info(context, coll_type, n_bytes, cost_table, num_algo,
                                            num_proto, n_channels);
}

acs_nccl_result_t get_chunk_size_v6(void* context, acs_nccl_func_t coll_type, size_t n_bytes, int algo, int proto,
                                    int n_channels, size_t* chunk_size) noexcept {
  return acspeed::nccl_tuner::get_chunk_size(context, coll_type, n_bytes, algo, proto, n_channels, chunk_size);
}

}  // namespace

extern "C" const acs_nccl_tuner_v6_t ncclTunerPlugin_v6 = {
    ACSPEED_NCCL_TUNER_NAME,
    init_v6,
    get_coll_info_v6,
    acspeed::nccl_tuner::finalize,
    get_chunk_size_v6,
};
