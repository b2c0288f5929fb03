/* Our own description of the types NCCL's tuner plugin ABI is built from (NCCL does not ship its
 * plugin headers). Written from NCCL 2.28's src/include/nccl_common.h and plugin/nccl_tuner.h: the
 * names are ours (prefixed so they never clash with a real nccl.h), the layout and values are
 * NCCL's and must not change. Values checked against NCCL v2.28.9 and still the same in 2.30.
 * One header per ABI version we export: tuner_v3.h, tuner_v4.h, tuner_v5.h, tuner_v6.h. */
#ifndef ACSPEED_NCCL_ABI_TUNER_COMMON_H_
#define ACSPEED_NCCL_ABI_TUNER_COMMON_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ncclResult_t: only success matters to a tuner: NCCL wraps init/getCollInfo in NCCLCHECK, so any
 * other value aborts the communicator. */
typedef enum { acs_nccl_success = 0 } acs_nccl_result_t;

/* ncclDebugLogLevel */
typedef enum {
  acs_nccl_log_none = 0,
  acs_nccl_log_version = 1,
  acs_nccl_log_warn = 2,
  acs_nccl_log_info = 3,
  acs_nccl_log_abort = 4,
  acs_nccl_log_trace = 5
} acs_nccl_log_level_t;

/* ncclDebugLogSubSys flags used by the tuner (NCCL_INIT, NCCL_TUNING). */
#define ACS_NCCL_SUBSYS_INIT 0x1UL
#define ACS_NCCL_SUBSYS_TUNING 0x40UL

/* ncclDebugLogger_t: printf-style; NCCL checks the level and subsystem before formatting. */
typedef void (*acs_nccl_logger_t)(acs_nccl_log_level_t level, unsigned long flags, const char* file,
                                  int line, const char* format, ...);

/* ncclFunc_t: the collective a getCollInfo call is about. */
typedef enum {
  acs_nccl_func_broadcast = 0,
  acs_nccl_func_reduce = 1,
  acs_nccl_func_all_gather = 2,
  acs_nccl_func_reduce_scatter = 3,
  acs_nccl_func_all_reduce = 4,
  acs_nccl_func_send_recv = 5,
  acs_nccl_func_send = 6,
  acs_nccl_func_recv = 7,
  acs_nccl_func_all_to_all = 8,
  acs_nccl_func_scatter = 9,
  acs_nccl_func_gather = 10
} acs_nccl_func_t;

/* Row (algorithm) and column (protocol) indices of the cost table: NCCL_ALGO_* and NCCL_PROTO_*. */
#define ACS_NCCL_ALGO_TREE 0
#define ACS_NCCL_ALGO_RING 1
#define ACS_NCCL_ALGO_COLLNET_DIRECT 2
#define ACS_NCCL_ALGO_COLLNET_CHAIN 3
#define ACS_NCCL_ALGO_NVLS 4
#define ACS_NCCL_ALGO_NVLS_TREE 5
#define ACS_NCCL_ALGO_PAT 6
#define ACS_NCCL_NUM_ALGORITHMS 7

#define ACS_NCCL_PROTO_LL 0
#define ACS_NCCL_PROTO_LL128 1
#define ACS_NCCL_PROTO_SIMPLE 2
#define ACS_NCCL_NUM_PROTOCOLS 3

/* A cost-table entry NCCL has ruled out for this call (NCCL_ALGO_PROTO_IGNORE). A tuner must leave
 * it as it is: turning it into a cost would let NCCL pick an unsupported algorithm. */
#define ACS_NCCL_ALGO_PROTO_IGNORE (-1.0f)

/* The cost table reaches getCollInfo as `float**` but is really a contiguous
 * float[numAlgo][numProto] (NCCL casts its float[7][3] array); entries are estimated times in
 * microseconds and NCCL runs the cheapest entry that is >= 0. */

#ifdef __cplusplus
}
#endif

#endif /* ACSPEED_NCCL_ABI_TUNER_COMMON_H_ */
