// The algorithm and compression tables (runtime/include/acspeed/comm_methods.h): one row per kind,
// in the enums' order, whose capabilities the hook, the step model, the guard and the reports read.
#include "acspeed/comm_methods.h"

#include <gtest/gtest.h>

#include "acspeed/config.h"
#include "acspeed/error.h"

namespace acspeed {
namespace {

TEST(CommMethods, EveryKindHasItsRowAndItsNameIsTheConfigs) {
  ASSERT_EQ(algorithms().size(), algorithm_names().size());
  for (size_t i = 0; i < algorithms().size(); ++i) {
    const auto& row = algorithms()[i];
    EXPECT_EQ(static_cast<size_t>(row.kind), i);
    EXPECT_EQ(&info(row.kind), &row);
    EXPECT_EQ(parse_algorithm(row.name), row.kind);
  }
  ASSERT_EQ(compressions().size(), compression_names().size());
  for (size_t i = 0; i < compressions().size(); ++i) {
    const auto& row = compressions()[i];
    EXPECT_EQ(static_cast<size_t>(row.kind), i);
    EXPECT_EQ(&info(row.kind), &row);
    EXPECT_EQ(parse_compression(row.name), row.kind);
    EXPECT_EQ(row.form == WireForm::kCast, !row.cast_dtype.empty()) << row.name;
  }
  EXPECT_TRUE(info(Algorithm::kHierarchical).by_node);
  EXPECT_FALSE(info(Algorithm::kReduceScatter).by_node);
}

TEST(CommMethods, ANodeByNodeAlgorithmReducesAsTheFlatOneAtOneRankPerNode) {
  EXPECT_TRUE(reduces_as_flat(Algorithm::kHierarchical, 1));
  EXPECT_FALSE(reduces_as_flat(Algorithm::kHierarchical, 2));
  EXPECT_TRUE(reduces_as_flat(Algorithm::kAllreduce, 8));
  EXPECT_TRUE(reduces_as_flat(Algorithm::kReduceScatter, 8));
}

TEST(CommMethods, WhatEachCompressionSendsAndWhetherItChangesNumerics) {
  EXPECT_EQ(wire_element_bytes(info(Compression::kNone), 4), 4);
  EXPECT_EQ(wire_element_bytes(info(Compression::kFp16), 4), 2);
  EXPECT_EQ(wire_element_bytes(info(Compression::kBf16), 2), 2);      // no wider than the cast: as it is
  EXPECT_EQ(wire_element_bytes(info(Compression::kPowerSgd), 2), 4);  // factors in at least fp32
  CommConfig c;
  EXPECT_FALSE(changes_numerics(c));
  c.compression = Compression::kBf16;
  EXPECT_TRUE(changes_numerics(c));
  EXPECT_TRUE(info(Compression::kPowerSgd).own_compute && info(Compression::kPowerSgd).ranked);
  EXPECT_EQ(info(Compression::kPowerSgd).collectives_per_bucket, 3);
  EXPECT_EQ(own_compute_names(false), "powersgd");
  EXPECT_EQ(own_compute_names(true), "PowerSGD");
}

TEST(CommMethods, AVersionOneConfigCannotNameACompressionOfALaterSchema) {
  try {
    config_from_json(R"({"version": 1, "compression": "powersgd"})");
    FAIL() << "accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("config version 1 has no compression 'powersgd' (it came with version 2)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(config_from_json(R"({"version": 1, "compression": "fp16"})").compression, Compression::kFp16);
}

}  // namespace
}  // namespace acspeed
