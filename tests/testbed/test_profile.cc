#include <gtest/gtest.h>

#include "acspeed/error.h"
#include "acspeed/testbed/profile.h"

namespace acspeed::testbed {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_profile(text);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(TestbedProfile, ParsesNodesProcsRateAndFlowRate) {
  const Profile p = parse_profile("4x2@2gbit/500mbit");
  EXPECT_EQ(p.nodes, 4);
  EXPECT_EQ(p.procs_per_node, 2);
  EXPECT_EQ(p.rate_bps, 2'000'000'000);
  EXPECT_EQ(p.flow_rate_bps, 500'000'000);
}

TEST(TestbedProfile, RateIsOptionalAndMeansUncapped) {
  const Profile p = parse_profile("2x1");
  EXPECT_EQ(p.nodes, 2);
  EXPECT_FALSE(p.rate_bps.has_value());
  EXPECT_FALSE(p.flow_rate_bps.has_value());
  EXPECT_EQ(p.text(), "2x1");
}

TEST(TestbedProfile, CanonicalTextRoundTripsAndPicksTheLargestWholeUnit) {
  EXPECT_EQ(parse_profile("2x1@1.5GBit").text(), "2x1@1500mbit");
  EXPECT_EQ(parse_profile("2x1@1000mbit").text(), "2x1@1gbit");
  EXPECT_EQ(parse_profile("2x1@2500kbit").text(), "2x1@2500kbit");
  for (const char* text : {"2x2@2gbit", "4x1@500mbit", "2x1@10gbit/2gbit", "1x8"}) {
    const Profile p = parse_profile(text);
    EXPECT_EQ(p.text(), text);
    EXPECT_EQ(parse_profile(p.text()), p);
  }
}

TEST(TestbedProfile, InstanceTypeNamesTheProfile) {
  EXPECT_EQ(parse_profile("2x1@1gbit").instance_type(), "testbed-2x1@1gbit");
  EXPECT_NE(parse_profile("2x1@1gbit").instance_type(), parse_profile("2x1@500mbit").instance_type());
}

TEST(TestbedProfile, BadInputNamesTheValueAndTheGrammar) {
  EXPECT_NE(error_of("2x").find("PROCS ''"), std::string::npos) << error_of("2x");
  EXPECT_NE(error_of("x1").find("NODES ''"), std::string::npos);
  EXPECT_NE(error_of("21").find("no 'x'"), std::string::npos);
  EXPECT_NE(error_of("0x1").find("NODES 0 is outside 1..64"), std::string::npos);
  EXPECT_NE(error_of("65x1").find("outside 1..64"), std::string::npos);
  EXPECT_NE(error_of("2x257").find("PROCS 257 is outside 1..256"), std::string::npos);
  EXPECT_NE(error_of("2x-1").find("PROCS '-1'"), std::string::npos);
  EXPECT_NE(error_of("2x1@").find("nothing after '@'"), std::string::npos);
  EXPECT_NE(error_of("2x1@fast").find("'fast' is not a rate"), std::string::npos);
  EXPECT_NE(error_of("2x1@1gbps").find("'1gbps' is not a rate"), std::string::npos);
  EXPECT_NE(error_of("2x1@1.2.3gbit").find("not a rate"), std::string::npos);
  EXPECT_NE(error_of("2x1@500kbit").find("outside 1mbit..100gbit"), std::string::npos);
  EXPECT_NE(error_of("2x1@200gbit").find("outside"), std::string::npos);
  EXPECT_NE(error_of("2x1@1gbit/2gbit").find("FLOWRATE 2gbit is above RATE 1gbit"), std::string::npos);
  EXPECT_NE(error_of("2x1@1gbit/").find("FLOWRATE '' is not a rate"), std::string::npos);
  for (const char* bad : {"2x", "0x1", "2x1@fast", "2x1@1gbit/2gbit"}) {
    EXPECT_NE(error_of(bad).find(bad), std::string::npos) << "message must name " << bad;
  }
}

TEST(TestbedRate, ParsesSiUnitsAndFormatsBack) {
  EXPECT_EQ(parse_rate("r", "1gbit"), 1'000'000'000);
  EXPECT_EQ(parse_rate("r", "1500kbit"), 1'500'000);
  EXPECT_EQ(parse_rate("r", "2000000bit"), 2'000'000);
  EXPECT_EQ(parse_rate("r", "0.5gbit"), 500'000'000);
  EXPECT_THROW(parse_rate("r", "800kbit"), InvalidArgument);  // below 1mbit
  EXPECT_THROW(parse_rate("r", "gbit"), InvalidArgument);
  EXPECT_THROW(parse_rate("r", "-1gbit"), InvalidArgument);
  EXPECT_EQ(format_rate(1'000'000'000), "1gbit");
  EXPECT_EQ(format_rate(1'500'000'000), "1500mbit");
  EXPECT_EQ(format_rate(1'234), "1234bit");
}

}  // namespace
}  // namespace acspeed::testbed
