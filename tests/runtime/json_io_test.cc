// Strict JSON reading: what every from_json beside a struct relies on.
#include "acspeed/json_io.h"

#include <functional>

#include <gtest/gtest.h>

#include "../support/error_text.h"

#include "acspeed/node_count.h"
#include "acspeed/precision.h"

namespace acspeed {
namespace {

using nlohmann::json;

const auto error_of = testing::invalid_argument_text;

TEST(JsonIo, WrongTypesAndMissingFieldsNameTheFieldAndTheValue) {
  const json j = json::parse(R"({"n": 3, "big": 5000000000, "neg": -1, "text": "x", "flag": true, "ratio": 1.5,
                                 "list": [1, "two"], "nothing": null})");
  EXPECT_EQ(json_io::required<int>(j, "n"), 3);
  EXPECT_EQ(json_io::required<double>(j, "n"), 3.0);  // an integer is a number
  EXPECT_EQ(error_of([&] { json_io::required<int>(j, "ratio"); }), "'ratio' must be an integer, got 1.5");
  EXPECT_EQ(error_of([&] { json_io::required<int>(j, "big"); }), "'big' must be an integer in range, got 5000000000");
  EXPECT_EQ(json_io::required<int64_t>(j, "big"), 5000000000);
  EXPECT_EQ(error_of([&] { json_io::required<uint64_t>(j, "neg"); }), "'neg' must be an integer in range, got -1");
  EXPECT_EQ(error_of([&] { json_io::required<std::string>(j, "n"); }), "'n' must be a string, got 3");
  EXPECT_EQ(error_of([&] { json_io::required<bool>(j, "text"); }), "'text' must be true or false, got \"x\"");
  EXPECT_EQ(error_of([&] { json_io::required<std::vector<int>>(j, "list"); }), "'list[1]' must be an integer, got \"two\"");
  EXPECT_EQ(error_of([&] { json_io::required<int>(j, "absent"); }), "'absent' is missing");
  EXPECT_EQ(json_io::optional<int>(j, "nothing"), std::nullopt);
  EXPECT_EQ(json_io::optional<int>(j, "absent"), std::nullopt);
  int kept = 7;
  json_io::read(j, "absent", kept);
  EXPECT_EQ(kept, 7);
}

TEST(JsonIo, ParseErrorsOfEveryKindAreInvalidArguments) {
  EXPECT_NE(error_of([] { json_io::parse("{", "the file"); }).find("the file is not valid JSON"), std::string::npos);
  // nlohmann reports an overflowing number as out_of_range, not as a parse error.
  EXPECT_NE(error_of([] { json_io::parse("[1e999]", "the file"); }).find("not valid JSON"), std::string::npos);
}

TEST(JsonIo, ASyntaxErrorNamesItsLineColumnAndWhatWasExpectedNotTheParsersInternals) {
  EXPECT_EQ(error_of([] { json_io::parse("this is not json", "ACSPEED_CONFIG=/x.json"); }),
            "ACSPEED_CONFIG=/x.json is not valid JSON at line 1, column 2: invalid literal 'th'; expected a JSON value "
            "(an object, array, string, number, true, false or null)");
  EXPECT_EQ(error_of([] { json_io::parse("{\n  \"version\": 1,\n}", "the file"); }),
            "the file is not valid JSON at line 3, column 1: unexpected '}'; expected a string in double quotes");
  EXPECT_EQ(error_of([] { json_io::parse("{\"version\": 1}}", "the file"); }),
            "the file is not valid JSON at line 1, column 15: unexpected '}'; expected nothing more (the end of the text)");
  EXPECT_EQ(error_of([] { json_io::parse("[1e999]", "the file"); }),
            "the file is not valid JSON: number overflow parsing '1e999'");
}

TEST(Precision, OneListParsedStrictly) {
  EXPECT_EQ(precision_names(), (std::vector<std::string>{"amp", "fp32", "fp16", "bf16"}));
  EXPECT_EQ(parse_precision("bf16"), Precision::kBf16);
  EXPECT_EQ(to_string(Precision::kAmp), "amp");
  EXPECT_EQ(error_of([] { parse_precision("fp8", "--precision"); }),
            "--precision 'fp8' is not one of amp, fp32, fp16, bf16");
}

class NodeCount : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    for (const char* name : {"NNODES", "GROUP_WORLD_SIZE", "LOCAL_WORLD_SIZE"}) unsetenv(name);
  }
};

TEST_F(NodeCount, NnodesThenTorchrunsGroupWorldSizeThenLocalWorldSize) {
  EXPECT_EQ(node_count(8), 1);
  setenv("LOCAL_WORLD_SIZE", "4", 1);
  EXPECT_EQ(node_count(8), 2);
  setenv("GROUP_WORLD_SIZE", "4", 1);
  EXPECT_EQ(node_count(8), 4);
  setenv("NNODES", "8", 1);
  EXPECT_EQ(node_count(8), 8);
}

TEST_F(NodeCount, ABadValueIsAnErrorNamingTheVariableNotSkipped) {
  setenv("GROUP_WORLD_SIZE", "2", 1);
  setenv("NNODES", "two", 1);
  EXPECT_EQ(error_of([] { node_count(4); }), "NNODES='two' is not a count of 1 to 4 (the world size): fix or unset it");
  setenv("NNODES", "5", 1);
  EXPECT_NE(error_of([] { node_count(4); }).find("NNODES='5'"), std::string::npos);
  unsetenv("NNODES");
  setenv("LOCAL_WORLD_SIZE", "0", 1);
  EXPECT_EQ(node_count(4), 2);  // GROUP_WORLD_SIZE decides before LOCAL_WORLD_SIZE is read
  unsetenv("GROUP_WORLD_SIZE");
  EXPECT_NE(error_of([] { node_count(4); }).find("LOCAL_WORLD_SIZE='0'"), std::string::npos);
  EXPECT_NE(error_of([] { validate_node_count(3, 2, "--nnodes"); }).find("--nnodes 3 must be between 1 and the world size 2"),
            std::string::npos);
}

}  // namespace
}  // namespace acspeed
