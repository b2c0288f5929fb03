/* NCCL tuner plugin ABI v5 (NCCL 2.28-2.29 prefer it; 2.30 falls back to it without v6), exported as
 * ncclTunerPlugin_v5. init gains the communicator id, the NVLink domain shape and NCCL's tuning
 * constants (in/out; acspeed leaves them untouched); `destroy` is now called `finalize`. */
#ifndef ACSPEED_NCCL_ABI_TUNER_V5_H_
#define ACSPEED_NCCL_ABI_TUNER_V5_H_

#include "nccl_tuner_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int n_nvl_domains;
  int min_ranks_per_nvl_domain;
  int max_ranks_per_nvl_domain;
} acs_nccl_nvl_domain_info_v5_t;

#define ACS_NCCL_V5_NUM_HW_LINKS 3     /* NVLink, PCI, network */
#define ACS_NCCL_V5_NUM_COMPCAPS 4     /* Volta, Ampere, Hopper, Blackwell */
#define ACS_NCCL_V5_NUM_TUNING_SCALES 3 /* 1, 2, 4 nodes */

typedef struct {
  double base_latencies[ACS_NCCL_NUM_ALGORITHMS][ACS_NCCL_NUM_PROTOCOLS];
  double hw_latencies[ACS_NCCL_V5_NUM_HW_LINKS][ACS_NCCL_NUM_ALGORITHMS][ACS_NCCL_NUM_PROTOCOLS];
  double ll_max_bws[ACS_NCCL_V5_NUM_COMPCAPS][ACS_NCCL_V5_NUM_TUNING_SCALES];
  double per_ch_max_ring_ll128_bws[ACS_NCCL_V5_NUM_COMPCAPS][ACS_NCCL_V5_NUM_TUNING_SCALES];
  double per_ch_max_tree_ll128_bws[ACS_NCCL_V5_NUM_COMPCAPS][ACS_NCCL_V5_NUM_TUNING_SCALES];
  double per_ch_max_tree_bws[ACS_NCCL_V5_NUM_COMPCAPS][ACS_NCCL_V5_NUM_TUNING_SCALES];
  double per_ch_max_nvls_tree_bws[ACS_NCCL_V5_NUM_COMPCAPS][ACS_NCCL_V5_NUM_TUNING_SCALES];
} acs_nccl_tuner_constants_v5_t;

typedef struct {
  const char* name;
  acs_nccl_result_t (*init)(void** context, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                            acs_nccl_logger_t logger, acs_nccl_nvl_domain_info_v5_t* nvl_domain_info,
                            acs_nccl_tuner_constants_v5_t* constants);
  /* In/out: cost_table (num_algo x num_proto). Out: n_channels (0 = NCCL decides). */
  acs_nccl_result_t (*get_coll_info)(void* context, acs_nccl_func_t coll_type, size_t n_bytes,
                                     int num_pipe_ops, float** cost_table, int num_algo,
                                     int num_proto, int reg_buff, int* n_channels);
  acs_nccl_result_t (*finalize)(void* context);
} acs_nccl_tuner_v5_t;

#ifdef __cplusplus
}
#endif

#endif /* ACSPEED_NCCL_ABI_TUNER_V5_H_ */
