/* NCCL tuner plugin ABI v4 (NCCL 2.24-2.27; still loaded by 2.28), exported as ncclTunerPlugin_v4.
 * v3 plus `reg_buff` (whether the user buffers can be registered) in get_coll_info. */
#ifndef ACSPEED_NCCL_ABI_TUNER_V4_H_
#define ACSPEED_NCCL_ABI_TUNER_V4_H_

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
                                     int num_proto, int reg_buff, int* n_channels);
  acs_nccl_result_t (*destroy)(void* context);
} acs_nccl_tuner_v4_t;

#ifdef __cplusplus
}
#endif

#endif /* ACSPEED_NCCL_ABI_TUNER_V4_H_ */
