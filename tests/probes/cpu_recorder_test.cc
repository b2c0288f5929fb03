#include "acspeed/cpu_recorder.h"

#include <gtest/gtest.h>

#include <thread>

#include "acspeed/error.h"

namespace acspeed {
namespace {

// A clock the test moves by hand.
struct ManualClock {
  int64_t now = 0;
  CpuRecorder::Clock fn() {
    return [this] { return now; };
  }
};

TEST(CpuRecorder, WithBucketsExposedCommunicationRunsFromTheLastGradientToTheLastCompletion) {
  ManualClock clock;
  CpuRecorder rec(clock.fn());
  clock.now = 1000;
  rec.step_begin();
  clock.now = 1300;
  rec.grad_ready();
  rec.bucket_launched(1, 4096);  // the last layers' bucket is ready first
  clock.now = 1500;
  rec.grad_ready();
  rec.bucket_launched(0, 8192);
  clock.now = 1600;
  rec.bucket_completed(1);
  clock.now = 1800;
  rec.bucket_completed(0);
  clock.now = 1850;
  rec.backward_end();
  clock.now = 1900;
  rec.step_end();

  const auto profiles = rec.profiles();
  ASSERT_EQ(profiles.size(), 1u);
  const StepProfile& p = profiles[0];
  EXPECT_EQ(p.wall_ns, 900);
  EXPECT_EQ(p.compute_ns, 500 + 50);       // [1000, 1500) and the optimizer [1850, 1900)
  EXPECT_EQ(p.comm_ns, 500);               // [1300, 1800)
  EXPECT_EQ(p.exposed_comm_ns, 300);       // [1500, 1800); [1800, 1850) is DDP's copy-back
  EXPECT_DOUBLE_EQ(p.overlap_ratio, 200.0 / 500.0);
  ASSERT_EQ(p.buckets.size(), 2u);
  EXPECT_EQ(p.buckets[0].index, 0);
  EXPECT_EQ(p.buckets[0].bytes, 8192);
  EXPECT_EQ(p.buckets[0].comm_ns, 300);
  EXPECT_EQ(p.buckets[1].comm_ns, 300);
  EXPECT_EQ(rec.unmatched_events(), 0);
}

TEST(CpuRecorder, WithoutAHookTheAutogradBoundaryStillGivesExposedCommunication) {
  ManualClock clock;
  CpuRecorder rec(clock.fn());
  rec.step_begin();
  clock.now = 70;
  rec.grad_ready();
  clock.now = 100;
  rec.backward_end();
  clock.now = 110;
  rec.step_end();
  const StepProfile p = rec.profiles().at(0);
  EXPECT_EQ(p.exposed_comm_ns, 30);
  EXPECT_TRUE(p.buckets.empty());
}

TEST(CpuRecorder, AGradientFromAnEarlierStepIsNotThisStepsEndOfCompute) {
  ManualClock clock;
  CpuRecorder rec(clock.fn());
  rec.step_begin();
  clock.now = 5;
  rec.grad_ready();
  rec.backward_end();
  rec.step_end();
  clock.now = 10;
  rec.step_begin();  // no gradient marked in this step (e.g. no parameter required grad)
  clock.now = 20;
  rec.backward_end();
  rec.step_end();
  EXPECT_EQ(rec.profiles().at(1).exposed_comm_ns, 0);
}

TEST(CpuRecorder, MisplacedStepMarksThrowButBucketEventsOutsideAStepAreOnlyCounted) {
  ManualClock clock;
  CpuRecorder rec(clock.fn());
  EXPECT_THROW(rec.step_end(), Error);
  EXPECT_THROW(rec.backward_end(), Error);
  rec.bucket_launched(0, 10);
  rec.bucket_completed(0);
  EXPECT_EQ(rec.unmatched_events(), 2);
  rec.step_begin();
  EXPECT_THROW(rec.step_begin(), Error);
  EXPECT_THROW(rec.reset(), Error);
  try {
    rec.step_end();
    FAIL() << "step_end without backward_end accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("backward_end"), std::string::npos) << e.what();
  }
}

TEST(CpuRecorder, ResetForgetsStepsAndCounters) {
  ManualClock clock;
  CpuRecorder rec(clock.fn());
  rec.bucket_completed(3);
  rec.step_begin();
  rec.backward_end();
  rec.step_end();
  rec.reset();
  EXPECT_TRUE(rec.profiles().empty());
  EXPECT_EQ(rec.unmatched_events(), 0);
}

TEST(CpuRecorder, CompletionsFromAnotherThreadAreRecorded) {
  CpuRecorder rec;  // the real clock
  rec.step_begin();
  rec.grad_ready();
  for (int i = 0; i < 8; ++i) rec.bucket_launched(i, 100);
  std::thread worker([&] {
    for (int i = 0; i < 8; ++i) rec.bucket_completed(i);
  });
  worker.join();
  rec.backward_end();
  rec.step_end();
  const StepProfile p = rec.profiles().at(0);
  EXPECT_EQ(p.buckets.size(), 8u);
  EXPECT_EQ(rec.unmatched_events(), 0);
  EXPECT_GE(p.wall_ns, p.exposed_comm_ns);
}

}  // namespace
}  // namespace acspeed
