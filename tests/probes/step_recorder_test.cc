#include "acspeed/step_recorder.h"

#include <gtest/gtest.h>

#include "acspeed/cpu_recorder.h"
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

// A backend that is enabled or not, and whose start() may fail.
class FakeRecorder : public CpuRecorder {
 public:
  FakeRecorder(std::string name, bool enabled, bool start_fails)
      : name_(std::move(name)), enabled_(enabled), start_fails_(start_fails) {}
  std::string name() const override { return name_; }
  bool enabled(const ProbeOptions&, std::string* why_not) override {
    if (!enabled_) *why_not = "switched off";
    return enabled_;
  }
  void start() override {
    if (start_fails_) ACS_THROW(Error, "cuptiActivityEnable failed: CUPTI_ERROR_UNKNOWN (999)");
  }

 private:
  std::string name_;
  bool enabled_;
  bool start_fails_;
};

TEST(SelectRecorder, TheFirstEnabledBackendThatStartsWinsAndTheOthersSayWhyNot) {
  std::vector<std::unique_ptr<StepRecorder>> list;
  list.push_back(std::make_unique<FakeRecorder>("off", false, false));
  list.push_back(std::make_unique<FakeRecorder>("broken", true, true));
  list.push_back(std::make_unique<FakeRecorder>("good", true, false));
  list.push_back(std::make_unique<FakeRecorder>("later", true, false));
  const auto selected = select_recorder(ProbeOptions{}, std::move(list));
  EXPECT_EQ(selected.recorder->name(), "good");
  ASSERT_EQ(selected.notes.size(), 2u);
  EXPECT_EQ(selected.notes[0], "off: unavailable: switched off");
  EXPECT_NE(selected.notes[1].find("broken: unavailable: failed to start: "), std::string::npos)
      << selected.notes[1];
  EXPECT_NE(selected.notes[1].find("999"), std::string::npos) << selected.notes[1];
}

TEST(SelectRecorder, ABackendNamedExplicitlyThatCannotRunIsAnErrorWithItsReason) {
  std::vector<std::unique_ptr<StepRecorder>> list;
  list.push_back(std::make_unique<FakeRecorder>("off", false, false));
  list.push_back(std::make_unique<FakeRecorder>("good", true, false));
  ProbeOptions options;
  options.backend = "off";
  try {
    select_recorder(options, std::move(list));
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("switched off"), std::string::npos) << e.what();
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
