// The NCCL-facing symbols of libnccl-tuner-acspeed.so, one per supported tuner ABI version (each
// defined in plugin_v<N>.cc as a thin adapter over tuner.h). Together with
// acspeed_nccl_tuner_set_rules these are the only symbols the library exports (exports.map).
// v2 is not exported: it predates the cost table, NCCL >= 2.28 always finds v5 or v6 first, and its
// algorithm/protocol outputs cannot express a rule that names only one of the two.
#pragma once

#include "tuner_v3.h"
#include "tuner_v4.h"
#include "tuner_v5.h"
#include "tuner_v6.h"

#define ACSPEED_EXPORT __attribute__((visibility("default")))

extern "C" {
ACSPEED_EXPORT extern const acs_nccl_tuner_v6_t ncclTunerPlugin_v6;
ACSPEED_EXPORT extern const acs_nccl_tuner_v5_t ncclTunerPlugin_v5;
ACSPEED_EXPORT extern const acs_nccl_tuner_v4_t ncclTunerPlugin_v4;
ACSPEED_EXPORT extern const acs_nccl_tuner_v3_t ncclTunerPlugin_v3;
}
