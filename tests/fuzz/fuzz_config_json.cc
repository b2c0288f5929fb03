// Fuzz target: the communication config JSON (runtime/src/config.cc through json_io), what the
// store's column, ACSPEED_CONFIG files and the NCCL plugin read.
// Properties: any text is either a config or an InvalidArgument (nothing else escapes: no
// nlohmann exception, no crash); a config read back from its own JSON is the same config, and it
// validates.
#include <string>
#include <vector>

#include "acspeed/config.h"
#include "acspeed/error.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace acspeed;
  const std::string text = fuzz::text_of(data, size);
  CommConfig config;
  try {
    std::vector<std::string> warnings;
    config = config_from_json(text, &warnings);
  } catch (const InvalidArgument&) {
    return 0;
  }
  config.validate();
  const std::string again = config_to_json(config);
  CommConfig back;
  try {
    back = config_from_json(again);
  } catch (const InvalidArgument& e) {
    fuzz::broken("a config's own JSON reads back", again + "\n" + e.what());
  }
  if (!(back == config)) fuzz::broken("config_from_json(config_to_json(c)) == c", again);
  (void)config.describe();
  return 0;
}
