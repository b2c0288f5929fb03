#include "acspeed/step_recorder.h"

#include <gtest/gtest.h>

#include "acspeed/error.h"

namespace acspeed {
namespace {

TEST(SelectRecorder, ACpuModelGetsTheCpuBackendAndEverySkippedBackendSaysWhy) {
  ProbeOptions options;
  options.device = "cpu";
  const auto selected = select_recorder(options);
  ASSERT_NE(selected.recorder, nullptr);
  EXPECT_EQ(selected.recorder->name(), "cpu");
  const auto names = recorder_names();
  EXPECT_EQ(names.back(), "cpu");
  EXPECT_EQ(selected.notes.size(), names.size() - 1);
  for (const auto& note : selected.notes) {
    EXPECT_NE(note.find("unavailable: "), std::string::npos) << note;
  }
}

TEST(SelectRecorder, UnknownDeviceOrBackendIsRejectedWithTheAcceptedNames) {
  ProbeOptions bad_device;
  bad_device.device = "tpu";
  EXPECT_THROW(select_recorder(bad_device), InvalidArgument);
  ProbeOptions bad_backend;
  bad_backend.backend = "nsight";
  try {
    select_recorder(bad_backend);
    FAIL();
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'nsight'"), std::string::npos) << what;
    EXPECT_NE(what.find("cpu"), std::string::npos) << what;
  }
}

#ifdef ACSPEED_PROBES_WITH_CUPTI
// On machines without a GPU (CI, developer boxes) the CUPTI backend must step aside cleanly.
TEST(SelectRecorder, ACudaModelWithoutAUsableGpuFallsBackToTheCpuBackend) {
  ProbeOptions options;
  options.device = "cuda";
  const auto selected = select_recorder(options);
  if (selected.recorder->name() == "cupti") GTEST_SKIP() << "this machine has a usable GPU";
  EXPECT_EQ(selected.recorder->name(), "cpu");
  ASSERT_EQ(selected.notes.size(), 1u);
  EXPECT_EQ(selected.notes[0].rfind("cupti: unavailable: ", 0), 0u) << selected.notes[0];
  options.backend = "cupti";
  EXPECT_THROW(select_recorder(options), InvalidArgument);
}
#endif

}  // namespace
}  // namespace acspeed
