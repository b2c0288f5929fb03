#include "acspeed/kernel_overlap.h"

#include <gtest/gtest.h>

#include "acspeed/error.h"

namespace acspeed {
namespace {

constexpr const char* kAllReduce = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
constexpr const char* kMangled = "_Z30ncclDevKernel_AllGather_RING_LLP14ncclDevComm";
constexpr const char* kGemm = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32";

TEST(KernelOverlap, NcclDuringComputeCountsAsHiddenCommunication) {
  // Compute on stream 7 over [0, 100); NCCL on stream 20 over [50, 150).
  const auto o = kernel_overlap({{kGemm, 7, {0, 60}}, {kGemm, 7, {60, 100}}, {kAllReduce, 20, {50, 150}}});
  EXPECT_EQ(o.compute_kernels, 2);
  EXPECT_EQ(o.comm_kernels, 1);
  EXPECT_EQ(o.comm_streams, 1);
  EXPECT_EQ(o.compute_ns, 100);
  EXPECT_EQ(o.comm_ns, 100);
  EXPECT_EQ(o.comm_compute_overlap_ns, 50);
  EXPECT_EQ(o.comm_cross_stream_ns, 0);
}

TEST(KernelOverlap, NcclSerialisedBehindComputeOnOneStreamOverlapsNothing) {
  // What a synchronous collective on the compute stream gives: one stream, kernels one after another.
  const auto o = kernel_overlap({{kGemm, 7, {0, 100}}, {kAllReduce, 7, {100, 200}}, {kMangled, 7, {200, 250}},
                                 {kGemm, 7, {250, 300}}});
  EXPECT_EQ(o.comm_streams, 1);
  EXPECT_EQ(o.comm_ns, 150);
  EXPECT_EQ(o.comm_compute_overlap_ns, 0);
  EXPECT_EQ(o.comm_cross_stream_ns, 0);
}

TEST(KernelOverlap, TwoLanesInFlightAtOnceShareTime) {
  // Lane streams 20, 21 and 22: [0, 100), [80, 130) and [120, 200): pairs overlap over [80, 100) and [120, 130).
  const auto o = kernel_overlap({{kAllReduce, 20, {0, 100}}, {kMangled, 21, {80, 130}}, {kAllReduce, 22, {120, 200}}});
  EXPECT_EQ(o.comm_streams, 3);
  EXPECT_EQ(o.comm_ns, 200);
  EXPECT_EQ(o.comm_cross_stream_ns, 30);
  EXPECT_EQ(o.compute_kernels, 0);
  EXPECT_EQ(o.comm_compute_overlap_ns, 0);
}

TEST(KernelOverlap, KernelsOfOneStreamNeverCountAsCrossStream) {
  // Overlapping records on the same stream (e.g. a trace's rounding) are one lane, not two.
  const auto o = kernel_overlap({{kAllReduce, 20, {0, 100}}, {kAllReduce, 20, {50, 150}}});
  EXPECT_EQ(o.comm_streams, 1);
  EXPECT_EQ(o.comm_cross_stream_ns, 0);
}

TEST(KernelOverlap, ARecordEndingBeforeItBeginsIsRefused) {
  EXPECT_THROW(kernel_overlap({{kGemm, 1, {10, 5}}}), InvalidArgument);
}

}  // namespace
}  // namespace acspeed
