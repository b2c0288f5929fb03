// Link rates (runtime/include/acspeed/link_rate.h): what acspeed-tune predict reads from an emulated
// cluster's instance type and from --link, without the testbed library (its own profile tests
// cover the grammar of the rates it caps links at).
#include "acspeed/link_rate.h"

#include <gtest/gtest.h>

#include "acspeed/error.h"

namespace acspeed {
namespace {

TEST(LinkRate, ATestbedInstanceTypeNamesItsLinkRate) {
  EXPECT_EQ(testbed_link_bps("testbed-2x1@1gbit"), 1'000'000'000);
  EXPECT_EQ(testbed_link_bps("testbed-4x1@2gbit/500mbit"), 2'000'000'000);  // the link, not the flow cap
  EXPECT_EQ(testbed_link_bps("testbed-2x1"), std::nullopt);                 // uncapped
  EXPECT_EQ(testbed_link_bps("ecs.gn7i-c32g1.8xlarge"), std::nullopt);
  EXPECT_EQ(testbed_link_bps("testbed-two@1gbit"), std::nullopt);  // only looks like a profile
  EXPECT_EQ(testbed_link_bps("testbed-2x1@fast"), std::nullopt);
}

TEST(LinkRate, RatesParseStrictlyAndFormatInTheLargestWholeUnit) {
  EXPECT_EQ(parse_rate("--link", "1.5gbit"), 1'500'000'000);
  EXPECT_EQ(parse_rate("--link", "500MBIT"), 500'000'000);
  EXPECT_EQ(format_rate(1'500'000'000), "1500mbit");
  EXPECT_EQ(format_rate(kMinRateBps), "1mbit");
  try {
    parse_rate("--link", "1tbit");
    FAIL() << "1tbit parsed";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--link '1tbit'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace acspeed
