// Fuzz target: decisions documents (db/src/decision_io.cc), what `configs import` and
// ACSPEED_CONFIG read.
// Properties: any text is either decisions or an InvalidArgument; is_decisions_document never
// throws; decisions written out and read back are written out the same (the format is stable).
#include <string>
#include <vector>

#include "acspeed/decision_io.h"
#include "acspeed/error.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace acspeed;
  const std::string text = fuzz::text_of(data, size);
  (void)is_decisions_document(text);
  std::vector<Decision> decisions;
  try {
    decisions = decisions_from_json(text);
  } catch (const InvalidArgument&) {
    return 0;
  }
  const std::string once = decisions_to_json(decisions);
  std::vector<Decision> back;
  try {
    back = decisions_from_json(once);
  } catch (const InvalidArgument& e) {
    fuzz::broken("a decisions export reads back", once + "\n" + e.what());
  }
  if (!is_decisions_document(once)) fuzz::broken("an export is a decisions document", once);
  if (back.size() != decisions.size()) fuzz::broken("as many decisions read back", once);
  const std::string twice = decisions_to_json(back);
  if (twice != once) fuzz::broken("decisions_to_json is stable over a round trip", once + "\n---\n" + twice);
  return 0;
}
