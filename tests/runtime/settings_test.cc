#include "acspeed/settings.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "acspeed/error.h"

namespace acspeed {
namespace {

TEST(Settings, RegistryDescribesEveryVariable) {
  for (const auto& spec : all_settings()) {
    EXPECT_EQ(spec.name.rfind("ACSPEED_", 0), 0u) << spec.name;
    EXPECT_FALSE(spec.description.empty()) << spec.name;
  }
  EXPECT_THROW(setting_spec("ACSPEED_NOT_A_SETTING"), InvalidArgument);
}

TEST(Settings, BoolsAreParsedStrictly) {
  setenv("ACSPEED_DISABLE", "1", 1);
  EXPECT_TRUE(setting_bool("ACSPEED_DISABLE"));
  setenv("ACSPEED_DISABLE", "off", 1);
  EXPECT_FALSE(setting_bool("ACSPEED_DISABLE"));
  setenv("ACSPEED_DISABLE", "maybe", 1);
  try {
    setting_bool("ACSPEED_DISABLE");
    FAIL() << "accepted 'maybe'";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("ACSPEED_DISABLE='maybe' is not a boolean"), std::string::npos);
  }
  unsetenv("ACSPEED_DISABLE");
  EXPECT_FALSE(setting_bool("ACSPEED_DISABLE"));  // default 0
}

TEST(Settings, ChoicesNameTheAcceptedValues) {
  setenv("ACSPEED_PRECISION", "fp8", 1);
  try {
    setting_string("ACSPEED_PRECISION");
    FAIL() << "accepted fp8";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("amp, fp32, fp16, bf16"), std::string::npos);
  }
  setenv("ACSPEED_PRECISION", "amp", 1);
  EXPECT_EQ(setting_string("ACSPEED_PRECISION").value(), "amp");
  unsetenv("ACSPEED_PRECISION");
  EXPECT_FALSE(setting_string("ACSPEED_PRECISION").has_value());
}

TEST(Settings, NumbersRejectTrailingGarbageAndRange) {
  EXPECT_EQ(parse_int("X", "42"), 42);
  EXPECT_THROW(parse_int("X", "42abc"), InvalidArgument);
  EXPECT_THROW(parse_int("X", ""), InvalidArgument);
  EXPECT_THROW(parse_int("X", "5", 1, 4), InvalidArgument);
  EXPECT_DOUBLE_EQ(parse_float("X", "2.5"), 2.5);
  EXPECT_THROW(parse_float("X", "nan"), InvalidArgument);
  EXPECT_THROW(parse_float("X", "1e999"), InvalidArgument);
}

}  // namespace
}  // namespace acspeed
