// ncclTunerPlugin_v3: for NCCL releases before v4 (no reg_buff argument).
#include <cstddef>

#include "acspeed/nccl_tuner_plugin.h"
#include "plugin_exports.h"
#include "tuner.h"

namespace {

static_assert(offsetof(acs_nccl_tuner_v3_t, init) == 8 && offsetof(acs_nccl_tuner_v3_t, destroy) == 24);

// v3 has no communicator id: contexts are numbered 0 in the logs.
acs_nccl_result_t init_v3(size_t n_ranks, size_t n_nodes, acs_nccl_logger_t logger, void** context) noexcept {
  return acspeed::nccl_tuner::init(3, logger, 0, n_ranks, n_nodes, context);
}

acs_nccl_result_t get_coll_info_v3(void* context, acs_nccl_func_t coll_type, size_t n_bytes,
                                   int /*num_pipe_ops*/, float** cost_table, int num_algo, int num_proto,
                                   int* n_channels) noexcept {
  return acspeed::nccl_tuner::get_coll_info(context, coll_type, n_bytes, cost_table, num_algo,
                                            num_proto, n_channels);
}

}  // namespace

extern "C" const acs_nccl_tuner_v3_t ncclTunerPlugin_v3 = {
    ACSPEED_NCCL_TUNER_NAME,
    init_v3,
    get_coll_info_v3,
    acspeed::nccl_tuner::finalize,
};
