// ncclTunerPlugin_v5: the ABI NCCL 2.28 and 2.29 prefer (NCCL 2.30 falls back to it).
#include <cstddef>

#include "acspeed/nccl_tuner_plugin.h"
#include "plugin_exports.h"
#include "tuner.h"

namespace {

// The layout NCCL 2.28 reads (tuner_v5.h): three pointers after the name, constants of 144 doubles.
static_assert(offsetof(acs_nccl_tuner_v5_t, init) == 8 && offsetof(acs_nccl_tuner_v5_t, finalize) == 24);
static_assert(sizeof(acs_nccl_tuner_constants_v5_t) == (7 * 3 + 3 * 7 * 3 + 5 * 4 * 3) * sizeof(double));
static_assert(sizeof(acs_nccl_nvl_domain_info_v5_t) == 3 * sizeof(int));
static_assert(sizeof(acs_nccl_func_t) == sizeof(int) && sizeof(acs_nccl_result_t) == sizeof(int));

acs_nccl_result_t init_v5(void** context, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                          acs_nccl_logger_t logger, acs_nccl_nvl_domain_info_v5_t* /*nvl_domain_info*/,
                          acs_nccl_tuner_constants_v5_t* /*constants: NCCL's, left as they are*/) noexcept {
  return acspeed::nccl_tuner::init(5, logger, comm_id, n_ranks, n_nodes, context);
}

acs_nccl_result_t get_coll_info_v5(void* context, acs_nccl_func_t coll_type, size_t n_bytes,
                                   int /*num_pipe_ops*/, float** cost_table, int num_algo, int num_proto,
                                   int /*reg_buff*/, int* n_channels) noexcept {
  return acspeed::nccl_tuner::get_coll_info(context, coll_type, n_bytes, cost_table, num_algo,
                                            num_proto, n_channels);
}

}  // namespace

extern "C" const acs_nccl_tuner_v5_t ncclTunerPlugin_v5 = {
    ACSPEED_NCCL_TUNER_NAME,
    init_v5,
    get_coll_info_v5,
    acspeed::nccl_tuner::finalize,
};
