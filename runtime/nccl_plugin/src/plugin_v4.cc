// ncclTunerPlugin_v4: for NCCL releases before v5 (NCCL 2.28 also accepts it).
#include <cstddef>

#include "acspeed/nccl_tuner_plugin.h"
#include "plugin_exports.h"
#include "tuner.h"

namespace {

static_assert(offsetof(acs_nccl_tuner_v4_t, init) == 8 && offsetof(acs_nccl_tuner_v4_t, destroy) == 24);

// v4 has no communicator id: contexts are numbered 0 in the logs.
acs_nccl_result_t init_v4(size_t n_ranks, size_t n_nodes, acs_nccl_logger_t logger, void** context) noexcept {
  return acspeed::nccl_tuner::init(4, logger, 0, n_ranks, n_nodes, context);
}

acs_nccl_result_t get_coll_info_v4(void* context, acs_nccl_func_t coll_type, size_t n_bytes,
                                   int /*num_pipe_ops*/, float** cost_table, int num_algo, int num_proto,
                                   int /*reg_buff*/, int* n_channels) noexcept {
  return acspeed::nccl_tuner::get_coll_info(context, coll_type, n_bytes, cost_table, num_algo,
                                            num_proto, n_channels);
}

}  // namespace

extern "C" const acs_nccl_tuner_v4_t ncclTunerPlugin_v4 = {
    ACSPEED_NCCL_TUNER_NAME,
    init_v4,
    get_coll_info_v4,
    acspeed::nccl_tuner::finalize,
};
