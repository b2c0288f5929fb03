/* NCCL tuner plugin ABI v3 (NCCL 2.22-2.23; still loaded by 2.28), exported as ncclTunerPlugin_v3.
 * First version with the cost table (see nccl_tuner_common.h for its layout). */
#ifndef ACSPEED_NCCL_ABI_TUNER_V3_H_
#define ACSPEED_NCCL_ABI_TUNER_V3_H_

#include "nccl_tuner_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const char* name;
  acs_nccl_result_t (*init)(size_t n_ranks, size_t n_nodes, acs_nccl_logger_t logger, void** context);
  /* In/out: cost_table (num_algo x num_proto). Out: n_channels (0 = NCCL decides). */
  acs_nccl_result_t (*get_coll_info)(void* context, acs_nccl_func_t coll_type, size_t n_bytes,
                                     int num_pipe_ops, float** cost_table, int num_algo,
                                     int num_proto, int* n_channels);
  acs_nccl_result_t (*destroy)(void* context);
} acs_nccl_tuner_v3_t;

#ifdef __cplusplus
}
#endif

#endif /* ACSPEED_NCCL_ABI_TUNER_V3_H_ */
