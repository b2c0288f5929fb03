// Fuzz target: the emulated cluster's profile strings and rates (testbed/src/profile.cc), what
// `acspeed-testbed up --profile` and `acspeed-tune --testbed` read.
// Properties: any text is either a profile or an InvalidArgument; a profile is within the limits
// and reads back from its canonical text as itself; a rate is within its limits and reads back
// from format_rate as itself.
#include <string>

#include "acspeed/error.h"
#include "acspeed/testbed/profile.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace acspeed;
  using namespace acspeed::testbed;
  const std::string text = fuzz::text_of(data, size);
  try {
    const Profile profile = parse_profile(text);
    if (profile.nodes < 1 || profile.nodes > kMaxNodes || profile.procs_per_node < 1 ||
        profile.procs_per_node > kMaxProcsPerNode) {
      fuzz::broken("a profile is within the node and process limits", profile.text());
    }
    if (profile.flow_rate_bps && !profile.rate_bps) fuzz::broken("a flow rate needs a link rate", profile.text());
    Profile back;
    try {
      back = parse_profile(profile.text());
    } catch (const InvalidArgument& e) {
      fuzz::broken("a profile's canonical text reads back", profile.text() + "\n" + e.what());
    }
    if (!(back == profile)) fuzz::broken("parse_profile(p.text()) == p", profile.text());
  } catch (const InvalidArgument&) {
  }
  try {
    const int64_t bps = parse_rate("fuzz", text);
    if (bps < kMinRateBps || bps > kMaxRateBps) fuzz::broken("a rate is within its limits", std::to_string(bps));
    int64_t back = 0;
    try {
      back = parse_rate("fuzz", format_rate(bps));
    } catch (const InvalidArgument& e) {
      fuzz::broken("format_rate reads back", format_rate(bps) + "\n" + e.what());
    }
    if (back != bps) fuzz::broken("parse_rate(format_rate(r)) == r", std::to_string(bps) + " " + format_rate(bps));
  } catch (const InvalidArgument&) {
  }
  return 0;
}
