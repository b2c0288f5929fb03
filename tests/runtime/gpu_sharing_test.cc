// The one rule the tuner keys its decision with and `import acspeed` looks up with.
#include "acspeed/gpu_sharing.h"

#include <gtest/gtest.h>

namespace acspeed {
namespace {

TEST(GpuSharing, RanksShareGpusOnlyWhenAskedAndMoreThanTheGpus) {
  EXPECT_TRUE(gpus_shared(true, 2, 1));    // the lent machine: 2 ranks on its one H200
  EXPECT_TRUE(gpus_shared(true, 16, 8));
  EXPECT_FALSE(gpus_shared(false, 2, 1));  // not asked: never (the tuner refuses the launch instead)
  EXPECT_FALSE(gpus_shared(true, 8, 8));   // asked, but a GPU per rank: an ordinary decision
  EXPECT_FALSE(gpus_shared(true, 1, 8));
  EXPECT_FALSE(gpus_shared(true, 2, 0));   // no GPU: CPU ranks share nothing
}

}  // namespace
}  // namespace acspeed
