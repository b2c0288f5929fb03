#include "acspeed/config.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "acspeed/error.h"

namespace acspeed {
namespace {

std::string error_of(const std::string& json) {
  try {
    config_from_json(json);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(CommConfig, DefaultIsDdpDefaultsAndNeedsNoHook) {
  CommConfig config;
  EXPECT_TRUE(config.is_default());
  EXPECT_FALSE(config.needs_comm_hook());
  EXPECT_EQ(config.describe(), "DDP defaults");
  config.bucket_cap_mb = 5;
  EXPECT_FALSE(config.is_default());
  EXPECT_FALSE(config.needs_comm_hook());  // a DDP knob alone keeps DDP's built-in allreduce
  config.streams = 2;
  EXPECT_TRUE(config.needs_comm_hook());
}

TEST(CommConfig, JsonRoundTripKeepsEveryField) {
  CommConfig config;
  config.bucket_cap_mb = 12.5;
  config.first_bucket_mb = 0.5;
  config.gradient_as_bucket_view = true;
  config.algorithm = Algorithm::kHierarchical;
  config.streams = 3;
  config.compression = Compression::kBf16;
  NcclRule rule;
  rule.collective = "allreduce";
  rule.min_bytes = 1024;
  rule.max_bytes = 1 << 20;
  rule.algorithm = "ring";
  rule.protocol = "ll128";
  rule.channels = 8;
  config.nccl_rules.push_back(rule);
  const auto json = config_to_json(config);
  EXPECT_EQ(config_from_json(json), config);
  EXPECT_NE(json.find("\"version\":2"), std::string::npos);
}

TEST(CommConfig, PowerSgdRankAndStartStepRoundTripAndBadValuesAreNamed) {
  const auto config = config_from_json(R"({"version":2,"compression":"powersgd","powersgd_rank":1,"powersgd_start_step":3})");
  EXPECT_EQ(config.compression, Compression::kPowerSgd);
  EXPECT_EQ(config.powersgd_rank, 1);
  EXPECT_EQ(config.powersgd_start_step, 3);
  EXPECT_EQ(config_from_json(config_to_json(config)), config);
  EXPECT_EQ(config.describe(), "allreduce, powersgd rank 1");
  EXPECT_NE(error_of(R"({"version":2,"compression":"powersgd","powersgd_rank":0})").find("powersgd_rank 0 is out of range"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"version":2,"powersgd_rank":-3})").find("powersgd_rank -3"), std::string::npos);
  EXPECT_NE(error_of(R"({"version":2,"powersgd_rank":2.5})").find("'powersgd_rank' must be an integer"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"version":2,"powersgd_start_step":-1})").find("powersgd_start_step -1"), std::string::npos);
}

TEST(CommConfig, AVersionOneConfigIsMigratedOnRead) {
  std::vector<std::string> warnings;
  const auto config = config_from_json(R"({"version":1,"streams":2,"compression":"fp16"})", &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(config.streams, 2);
  EXPECT_EQ(config.powersgd_rank, kDefaultPowerSgdRank);
  EXPECT_EQ(config.powersgd_start_step, kDefaultPowerSgdStartStep);
  EXPECT_NE(config_to_json(config).find("\"version\":2"), std::string::npos);
  // version 1 had no PowerSGD: its fields are unknown there, and it cannot name powersgd
  config_from_json(R"({"version":1,"powersgd_rank":2})", &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("powersgd_rank"), std::string::npos);
  EXPECT_NE(error_of(R"({"version":1,"compression":"powersgd"})").find("version 1 has no compression 'powersgd'"),
            std::string::npos);
}

TEST(CommConfig, RejectsBadValuesByName) {
  EXPECT_NE(error_of(R"({"version":1,"algorithm":"ring_allreduce"})").find("'ring_allreduce' is not one of allreduce"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"version":1,"compression":"int8"})").find("compression 'int8'"), std::string::npos);
  EXPECT_NE(error_of(R"({"version":1,"streams":0})").find("streams 0 is out of range"), std::string::npos);
  EXPECT_NE(error_of(R"({"version":1,"bucket_cap_mb":-1})").find("bucket_cap_mb -1"), std::string::npos);
  EXPECT_NE(error_of(R"({"version":1,"bucket_cap_mb":0})").find("bucket_cap_mb 0"), std::string::npos);
  EXPECT_NE(error_of(R"({"version":1,"streams":"two"})").find("'streams' must be an integer"), std::string::npos);
  EXPECT_NE(error_of(R"({"version":3})").find("version 3 is not supported by this build (accepted: 1 to 2)"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"streams":2})").find("no 'version'"), std::string::npos);
  EXPECT_NE(error_of("not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(R"({"version":1,"nccl_rules":[{"protocol":"fast"}]})").find("nccl_rules[0].protocol 'fast'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"version":1,"nccl_rules":[{"min_bytes":10,"max_bytes":10}]})").find("byte range"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"version":1,"nccl_rules":[{"channels":65}]})").find("channels 65"), std::string::npos);
}

TEST(CommConfig, NcclChunkBytesIsOptionalWrittenOnlyWhenSetAndRangeChecked) {
  // A rule without it reads as NCCL's choice and is written as it always was: stored configs keep their text.
  const std::string plain = R"({"version":2,"nccl_rules":[{"collective":"any","channels":4}]})";
  const auto config = config_from_json(plain);
  ASSERT_EQ(config.nccl_rules.size(), 1u);
  EXPECT_FALSE(config.nccl_rules[0].chunk_bytes.has_value());
  EXPECT_EQ(config_to_json(config).find("chunk_bytes"), std::string::npos);
  EXPECT_FALSE(config_from_json(R"({"version":1,"nccl_rules":[{"chunk_bytes":null}]})").nccl_rules[0].chunk_bytes);

  std::vector<std::string> warnings;
  const auto chunked =
      config_from_json(R"({"version":2,"nccl_rules":[{"collective":"any","chunk_bytes":131072}]})", &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(chunked.nccl_rules[0].chunk_bytes, std::optional<int64_t>(131072));
  EXPECT_NE(config_to_json(chunked).find("\"chunk_bytes\":131072"), std::string::npos);
  EXPECT_EQ(config_from_json(config_to_json(chunked)), chunked);
  EXPECT_FALSE(chunked == config_from_json(R"({"version":2,"nccl_rules":[{"collective":"any"}]})"));

  EXPECT_EQ(config_from_json(R"({"version":2,"nccl_rules":[{"chunk_bytes":4096}]})").nccl_rules[0].chunk_bytes,
            std::optional<int64_t>(kMinNcclChunkBytes));
  EXPECT_NE(error_of(R"({"version":2,"nccl_rules":[{"chunk_bytes":4095}]})")
                .find("nccl_rules[0].chunk_bytes 4095 is out of range (accepted: 4096 to 1073741824 bytes"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"version":2,"nccl_rules":[{"chunk_bytes":0}]})").find("chunk_bytes 0 is out of range"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"version":2,"nccl_rules":[{"chunk_bytes":1073741825}]})").find("chunk_bytes 1073741825"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"version":2,"nccl_rules":[{"chunk_bytes":"1M"}]})").find("'chunk_bytes' must be an integer"),
            std::string::npos);
}

TEST(CommConfig, NcclSocketsAreOptionalWrittenOnlyWhenSetAndWithinNcclsLimits) {
  // Absent or null: NCCL's choice, and the text every stored config already has.
  const auto plain = config_from_json(R"({"version":2,"streams":2})");
  EXPECT_FALSE(plain.nccl_sockets.has_value());
  EXPECT_EQ(config_to_json(plain).find("nccl_sockets"), std::string::npos);
  EXPECT_FALSE(config_from_json(R"({"version":1,"nccl_sockets":null})").nccl_sockets);

  std::vector<std::string> warnings;
  const auto set = config_from_json(R"({"version":2,"nccl_sockets":{"threads":2,"per_thread":8}})", &warnings);
  EXPECT_TRUE(warnings.empty());
  ASSERT_TRUE(set.nccl_sockets.has_value());
  EXPECT_EQ(set.nccl_sockets->sockets(), 16);
  EXPECT_FALSE(set.is_default());  // a decision that sets only them is a decision
  EXPECT_FALSE(set.needs_comm_hook());
  EXPECT_EQ(set.describe(), "allreduce, NCCL sockets 2x8");
  EXPECT_NE(config_to_json(set).find(R"("nccl_sockets":{"per_thread":8,"threads":2})"), std::string::npos)
      << config_to_json(set);
  EXPECT_EQ(config_from_json(config_to_json(set)), set);
  EXPECT_FALSE(set == plain);
  EXPECT_EQ(nccl_socket_variables(*set.nccl_sockets),
            (std::vector<std::pair<std::string, std::string>>{{"NCCL_SOCKET_NTHREADS", "2"},
                                                              {"NCCL_NSOCKS_PERTHREAD", "8"}}));

  EXPECT_EQ(error_of(R"({"version":2,"nccl_sockets":{"threads":16,"per_thread":8}})"),
            "nccl_sockets 16x8 is out of range (accepted: '0' for NCCL's choice, or THREADSxSOCKETS such as 2x4: "
            "threads 1 to 16, sockets per thread 1 to 64, threads x sockets at most 64)");
  EXPECT_NE(error_of(R"({"version":2,"nccl_sockets":{"threads":17,"per_thread":1}})").find("17x1 is out of range"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"version":2,"nccl_sockets":{"threads":0,"per_thread":4}})").find("0x4 is out of range"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"version":2,"nccl_sockets":"2x4"})").find("'nccl_sockets' must be an object"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"version":2,"nccl_sockets":{"threads":2}})").find("nccl_sockets: "), std::string::npos);
  EXPECT_EQ(parse_nccl_sockets("ACSPEED_NCCL_SOCKETS", "0"), std::nullopt);
  EXPECT_EQ(to_string(parse_nccl_sockets("ACSPEED_NCCL_SOCKETS", "4x16")), "4x16");
}

TEST(CommConfig, UnknownKeysWarnButParse) {
  std::vector<std::string> warnings;
  const auto config = config_from_json(R"({"version":1,"streams":2,"bucket_size":5})", &warnings);
  EXPECT_EQ(config.streams, 2);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("bucket_size"), std::string::npos);
}

TEST(CommConfig, EnvPinsOverrideAndAreValidatedStrictly) {
  CommConfig config;
  setenv("ACSPEED_STREAMS", "4", 1);
  setenv("ACSPEED_ALGORITHM", "reduce_scatter", 1);
  auto pinned = apply_env_pins(config);
  EXPECT_EQ(config.streams, 4);
  EXPECT_EQ(config.algorithm, Algorithm::kReduceScatter);
  EXPECT_EQ(pinned, (std::vector<std::string>{"algorithm", "streams"}));
  setenv("ACSPEED_STREAMS", "abc", 1);
  try {
    apply_env_pins(config);
    FAIL() << "ACSPEED_STREAMS=abc accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("ACSPEED_STREAMS='abc' is not an integer"), std::string::npos);
  }
  setenv("ACSPEED_STREAMS", "0", 1);
  EXPECT_THROW(apply_env_pins(config), InvalidArgument);
  unsetenv("ACSPEED_STREAMS");
  unsetenv("ACSPEED_ALGORITHM");
  setenv("ACSPEED_POWERSGD_RANK", "2", 1);
  EXPECT_EQ(apply_env_pins(config), (std::vector<std::string>{"powersgd_rank"}));
  EXPECT_EQ(config.powersgd_rank, 2);
  setenv("ACSPEED_POWERSGD_RANK", "0", 1);
  try {
    apply_env_pins(config);
    FAIL() << "ACSPEED_POWERSGD_RANK=0 accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("ACSPEED_POWERSGD_RANK=0 is out of range"), std::string::npos) << e.what();
  }
  unsetenv("ACSPEED_POWERSGD_RANK");
  setenv("ACSPEED_NCCL_SOCKETS", "2x4", 1);
  EXPECT_EQ(apply_env_pins(config), (std::vector<std::string>{"nccl_sockets"}));
  EXPECT_EQ(to_string(config.nccl_sockets), "2x4");
  setenv("ACSPEED_NCCL_SOCKETS", "0", 1);
  apply_env_pins(config);
  EXPECT_FALSE(config.nccl_sockets.has_value());  // 0: NCCL's choice, pinned
  setenv("ACSPEED_NCCL_SOCKETS", "64x1", 1);
  try {
    apply_env_pins(config);
    FAIL() << "ACSPEED_NCCL_SOCKETS=64x1 accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("ACSPEED_NCCL_SOCKETS '64x1' is out of range"), std::string::npos) << e.what();
  }
  unsetenv("ACSPEED_NCCL_SOCKETS");
}

}  // namespace
}  // namespace acspeed
