// The gradients' shapes the workers report and the bytes each compression sends per step and rank.
#include "acspeed/tuner/gradient_layout.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "acspeed/error.h"
#include "acspeed/tuner/trial_metrics.h"

namespace acspeed::tuner {
namespace {

// Two 64x27 fp32 matrices (a conv 64x3x3x3), a 10x512 fp32 classifier, a 3x2 fp32 matrix (below
// rank 4 on both sides), three 64-element fp32 vectors.
GradientLayout layout() {
  GradientLayout g;
  g.matrices = {{64, 27, 4, 2}, {10, 512, 4, 1}, {3, 2, 4, 1}};
  g.vectors = {{64, 4, 3}};
  return g;
}

CommConfig with(Compression compression, int rank = 4) {
  CommConfig c;
  c.compression = compression;
  c.powersgd_rank = rank;
  return c;
}

TEST(GradientLayout, UncompressedAndHalfPrecisionSendTheGradientsAtTheirWidth) {
  const int64_t elements = 2 * 64 * 27 + 10 * 512 + 3 * 2 + 3 * 64;
  EXPECT_EQ(sent_bytes(layout(), with(Compression::kNone)), 4 * elements);
  EXPECT_EQ(sent_bytes(layout(), with(Compression::kFp16)), 2 * elements);
  EXPECT_EQ(sent_bytes(layout(), with(Compression::kBf16)), 2 * elements);
}

TEST(GradientLayout, PowerSgdSendsBothFactorsAtTheClampedRankAndTheVectorsWhole) {
  // rank 4: P and Q of each matrix, (rows + columns) x 4; the 3x2 matrix is clamped to rank 2.
  EXPECT_EQ(sent_bytes(layout(), with(Compression::kPowerSgd, 4)),
            4 * (2 * (64 + 27) * 4 + (10 + 512) * 4 + (3 + 2) * 2 + 3 * 64));
  EXPECT_EQ(sent_bytes(layout(), with(Compression::kPowerSgd, 1)),
            4 * (2 * (64 + 27) + (10 + 512) + (3 + 2) + 3 * 64));
  // A rank above every side sends no more than rank = the smaller side: 10 for the classifier.
  EXPECT_EQ(sent_bytes(layout(), with(Compression::kPowerSgd, 1000)),
            4 * (2 * (64 + 27) * 27 + (10 + 512) * 10 + (3 + 2) * 2 + 3 * 64));
}

TEST(GradientLayout, PowerSgdFactorsOfHalfPrecisionGradientsAreFp32) {
  GradientLayout half;
  half.matrices = {{100, 50, 2, 1}};
  half.vectors = {{100, 2, 1}};
  EXPECT_EQ(sent_bytes(half, with(Compression::kPowerSgd, 1)), 4 * (150 + 100));
  EXPECT_EQ(sent_bytes(half, with(Compression::kFp16)), 2 * (5000 + 100));  // already 2 bytes wide
  EXPECT_EQ(sent_bytes(half, with(Compression::kNone)), 2 * (5000 + 100));
}

TEST(GradientLayout, TravelsInTheComputeTrialsMetricsAndRejectsMalformedEntries) {
  TrialMetrics m;
  m.gradients = layout();
  const TrialMetrics back = metrics_from_json(metrics_to_json(m));
  ASSERT_TRUE(back.gradients);
  EXPECT_EQ(sent_bytes(*back.gradients, with(Compression::kPowerSgd)),
            sent_bytes(layout(), with(Compression::kPowerSgd)));
  EXPECT_FALSE(metrics_from_json(R"({"p50_s": 0.5})").gradients);
  for (const char* bad : {R"({"gradients": {"matrices": [[64, 27, 4]]}})",         // three numbers
                          R"({"gradients": {"matrices": [[64, 0, 4, 1]]}})",       // a side of 0
                          R"({"gradients": {"vectors": [[64, 32, 1]]}})",          // 32-byte elements
                          R"({"gradients": {"vectors": "64"}})", R"({"gradients": []})"}) {
    try {
      metrics_from_json(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("gradients"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace acspeed::tuner
