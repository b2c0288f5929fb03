#include "acspeed/fingerprint.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>

#include "acspeed/model_signature.h"

namespace acspeed {
namespace {

TEST(Fingerprint, GpuKeyNamesModelCountAndInterconnect) {
  GpuInfo gpu{"NVIDIA H200", 8, true, "580.1"};
  EXPECT_EQ(hardware_key(gpu, "ignored", 96), "8xNVIDIA-H200-nvlink");
  gpu.nvlink = false;
  gpu.model = "NVIDIA A10";
  gpu.count = 1;
  EXPECT_EQ(hardware_key(gpu, "ignored", 96), "1xNVIDIA-A10-pcie");
}

TEST(Fingerprint, CpuKeyDropsMarketingNoiseAndClock) {
  EXPECT_EQ(hardware_key(std::nullopt, "Intel(R) Xeon(R) Platinum 8369B CPU @ 2.70GHz", 32),
            "cpu-32xIntel-Xeon-Platinum-8369B");
  EXPECT_EQ(hardware_key(std::nullopt, "AMD EPYC 7763 64-Core Processor", 2), "cpu-2xAMD-EPYC-7763-64-Core");
}

TEST(Fingerprint, StableAcrossCallsAndNeverTheHostname) {
  FingerprintOptions options;
  options.cpu_model = "Test CPU";
  options.cpu_cores = 4;
  options.gpu = GpuInfo{};  // count 0: treated as no GPU
  options.gpu->count = 0;
  unsetenv("ACSPEED_INSTANCE_TYPE");
  const auto a = fingerprint(options);
  const auto b = fingerprint(options);
  EXPECT_EQ(a.instance_type, b.instance_type);
  EXPECT_EQ(a.instance_type, "cpu-4xTest");
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  EXPECT_EQ(a.instance_type.find(host), std::string::npos);
  // The real machine's key is stable too.
  EXPECT_EQ(fingerprint().instance_type, fingerprint().instance_type);
}

TEST(Fingerprint, ExplicitInstanceTypeWinsAndIsMarked) {
  setenv("ACSPEED_INSTANCE_TYPE", "ecs.ebmgn7t.32xlarge", 1);
  FingerprintOptions options;
  options.cpu_model = "Test CPU";
  options.cpu_cores = 4;
  const auto fp = fingerprint(options);
  unsetenv("ACSPEED_INSTANCE_TYPE");
  EXPECT_EQ(fp.instance_type, "ecs.ebmgn7t.32xlarge");
  EXPECT_TRUE(fp.explicit_name);
  EXPECT_NE(fp.detected_key, fp.instance_type);
}

TEST(Fingerprint, MajorMinor) {
  EXPECT_EQ(major_minor("2.28.9"), "2.28");
  EXPECT_EQ(major_minor("2.15.0+cu132"), "2.15");
  EXPECT_EQ(major_minor("13"), "13");
}

TEST(ModelSignature, DependsOnNamesShapesAndDtypes) {
  std::vector<ParamInfo> params = {{"fc.weight", {10, 512}, "float32"}, {"fc.bias", {10}, "float32"}};
  const auto base = model_signature(params);
  EXPECT_EQ(base, model_signature(params));
  EXPECT_EQ(base.rfind("p2-", 0), 0u);
  auto changed = params;
  changed[0].shape = {11, 512};
  EXPECT_NE(model_signature(changed), base);
  changed = params;
  changed[1].dtype = "float16";
  EXPECT_NE(model_signature(changed), base);
  changed = params;
  changed[1].name = "head.bias";
  EXPECT_NE(model_signature(changed), base);
}

}  // namespace
}  // namespace acspeed
