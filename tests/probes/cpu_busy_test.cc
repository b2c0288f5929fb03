#include "acspeed/cpu_busy.h"

#include <gtest/gtest.h>

#include "acspeed/error.h"

namespace acspeed {
namespace {

// A /proc/stat as Linux writes it: the machine's line, then one per core, then other counters.
constexpr const char* kStat =
    "cpu  1000 10 300 9000 50 7 20 3 0 0\n"
    "cpu0 400 5 100 4000 25 2 10 1 0 0\n"
    "cpu1 600 5 200 5000 25 5 10 2 0 0\n"
    "cpu12 100000 0 0 0 0 0 0 0 0 0\n"
    "intr 123456 1 2 3\n"
    "ctxt 98765\n";

TEST(CpuBusy, SumsTheBusyColumnsOfTheChosenCores) {
  // core 0: user 400 + nice 5 + system 100 + irq 2 + softirq 10 + steal 1 = 518 ticks (idle, iowait left out)
  EXPECT_DOUBLE_EQ(busy_seconds(kStat, {0}, 100), 5.18);
  // core 1: 600 + 5 + 200 + 5 + 10 + 2 = 822
  EXPECT_DOUBLE_EQ(busy_seconds(kStat, {0, 1}, 100), 13.40);
  EXPECT_DOUBLE_EQ(busy_seconds(kStat, {12}, 1000), 100.0);  // cpu12 is not cpu1
}

TEST(CpuBusy, IgnoresTheMachineLineAndCoresNotThere) {
  EXPECT_DOUBLE_EQ(busy_seconds(kStat, {}, 100), 0.0);
  EXPECT_DOUBLE_EQ(busy_seconds(kStat, {7}, 100), 0.0);
}

TEST(CpuBusy, OldKernelsWithFourColumnsCountUserNiceSystem) {
  EXPECT_DOUBLE_EQ(busy_seconds("cpu0 10 20 30 40\n", {0}, 10), 6.0);
}

TEST(CpuBusy, BadInputIsAClearError) {
  EXPECT_THROW(busy_seconds("cpu0 10 x 30 40\n", {0}, 100), InvalidArgument);
  EXPECT_THROW(busy_seconds(kStat, {0}, 0), InvalidArgument);
}

TEST(CpuBusy, ThisMachineCountsForward) {
  const auto before = cores_busy_seconds({0});
  ASSERT_TRUE(before.has_value());
  volatile double sink = 0;
  for (int i = 0; i < 20000000; ++i) sink = sink + i;  // some work on whichever core runs this
  const auto after = cores_busy_seconds({0});
  ASSERT_TRUE(after.has_value());
  EXPECT_GE(*after, *before);
}

}  // namespace
}  // namespace acspeed
