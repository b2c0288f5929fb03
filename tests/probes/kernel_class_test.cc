#include "acspeed/kernel_class.h"

#include <gtest/gtest.h>

namespace acspeed {
namespace {

TEST(KernelClass, NcclDeviceKernelsAreCommunicationPlainOrMangled) {
  for (const char* name : {
           "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
           "ncclSymkDevKernel_AllReduce_AGxLL_R_sum_f32",
           "ncclKernel_AllReduce_RING_LL_Sum_float",
           "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE",
           "_Z25ncclKernel_Broadcast_RINGv",
       }) {
    EXPECT_EQ(classify_kernel(name), KernelClass::kCommunication) << name;
  }
}

TEST(KernelClass, EverythingElseIsCompute) {
  for (const char* name : {
           "",
           "_Z",
           "_Z999ncclDevKernel_",  // length runs past the end: not a valid mangled name
           "volta_sgemm_128x64_nn",
           "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEEEEviT0_T1_",
           "my_ncclDevKernel_lookalike",
           "nccl_custom_reduce",
           "_Z18ncclUserHelperKernv",
       }) {
    EXPECT_EQ(classify_kernel(name), KernelClass::kCompute) << name;
  }
}

}  // namespace
}  // namespace acspeed
