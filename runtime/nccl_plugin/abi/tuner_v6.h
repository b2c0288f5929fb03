/* NCCL tuner plugin ABI v6 (NCCL 2.30, the version it prefers; it falls back to v5), exported as
 * ncclTunerPlugin_v6. Written from NCCL v2.30.7-1's src/include/plugin/tuner/tuner_v6.h: v5's init,
 * getCollInfo and finalize, then getChunkSize, which may change the chunk size NCCL computed for a
 * collective it has already chosen the algorithm, protocol and channels of (NCCL pre-fills
 * *chunk_size, then clamps what the tuner leaves there to its buffer's maximum and aligns it down to
 * the protocol's grain; src/enqueue.cc). The constants and NVLink domain types are v5's. */
#ifndef ACSPEED_NCCL_ABI_TUNER_V6_H_
#define ACSPEED_NCCL_ABI_TUNER_V6_H_

#include "tuner_v5.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef acs_nccl_nvl_domain_info_v5_t acs_nccl_nvl_domain_info_v6_t;
typedef acs_nccl_tuner_constants_v5_t acs_nccl_tuner_constants_v6_t;

typedef struct {
  const char* name;
  acs_nccl_result_t (*init)(void** context, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                            acs_nccl_logger_t logger, acs_nccl_nvl_domain_info_v6_t* nvl_domain_info,
                            acs_nccl_tuner_constants_v6_t* constants);
  /* In/out: cost_table (num_algo x num_proto). Out: n_channels (0 = NCCL decides). */
  acs_nccl_result_t (*get_coll_info)(void* context, acs_nccl_func_t coll_type, size_t n_bytes,
                                     int num_pipe_ops, float** cost_table, int num_algo,
                                     int num_proto, int reg_buff, int* n_channels);
  acs_nccl_result_t (*finalize)(void* context);
  /* Optional (NULL: NCCL's chunk size). algo/proto: the chosen ACS_NCCL_ALGO_* / ACS_NCCL_PROTO_*.
   * In/out: chunk_size, in bytes. */
  acs_nccl_result_t (*get_chunk_size)(void* context, acs_nccl_func_t coll_type, size_t n_bytes, int algo,
                                      int proto, int n_channels, size_t* chunk_size);
} acs_nccl_tuner_v6_t;

#ifdef __cplusplus
}
#endif

#endif /* ACSPEED_NCCL_ABI_TUNER_V6_H_ */
