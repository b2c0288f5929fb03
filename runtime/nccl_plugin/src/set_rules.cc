// acspeed_nccl_tuner_set_rules: the C entry point the Python side calls through ctypes.
#include "acspeed/nccl_tuner_plugin.h"
#include "tuner.h"

extern "C" int acspeed_nccl_tuner_set_rules(const char* config_json) {
  return acspeed::nccl_tuner::set_rules(config_json);
}
