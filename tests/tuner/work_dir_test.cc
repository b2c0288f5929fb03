// The tuner's work folder (worker_launch.h): in the temporary directory a user names with TMPDIR,
// else /tmp, and in /tmp when TMPDIR is no folder or too long a path for the control socket inside it.
#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "worker_launch.h"

namespace acspeed::tuner {
namespace {

// Sets TMPDIR for one test and puts back what was there.
class TmpdirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* before = getenv("TMPDIR")) before_ = before;
  }
  void TearDown() override {
    if (before_) {
      setenv("TMPDIR", before_->c_str(), 1);
    } else {
      unsetenv("TMPDIR");
    }
  }
  std::optional<std::string> before_;
};

TEST_F(TmpdirTest, TheWorkFolderIsMadeInTmpdir) {
  char folder[] = "/tmp/acspeed-tmpdir-XXXXXX";
  ASSERT_NE(mkdtemp(folder), nullptr);
  setenv("TMPDIR", folder, 1);
  EXPECT_EQ(work_dir_pattern(), std::string(folder) + "/acspeed-tune-XXXXXX");
  const std::string made = make_work_dir();
  EXPECT_EQ(std::filesystem::path(made).parent_path(), std::filesystem::path(folder));
  EXPECT_TRUE(std::filesystem::is_directory(made));
  std::filesystem::remove_all(folder);
}

TEST_F(TmpdirTest, WithoutTmpdirTheWorkFolderIsInTmp) {
  unsetenv("TMPDIR");
  EXPECT_EQ(work_dir_pattern(), "/tmp/acspeed-tune-XXXXXX");
}

TEST_F(TmpdirTest, ATmpdirTooLongForTheControlSocketFallsBackToTmp) {
  // 90 bytes of folder + "/acspeed-tune-XXXXXX/control.sock" is past a Unix socket's 107.
  const std::string folder = "/tmp/" + std::string(85, 'd');
  ASSERT_TRUE(std::filesystem::create_directories(folder) || std::filesystem::is_directory(folder));
  setenv("TMPDIR", folder.c_str(), 1);
  EXPECT_EQ(work_dir_pattern(), "/tmp/acspeed-tune-XXXXXX");
  std::filesystem::remove(folder);
}

TEST_F(TmpdirTest, ATmpdirThatIsNoFolderFallsBackToTmp) {
  setenv("TMPDIR", "/nonexistent-acspeed-tmpdir", 1);
  EXPECT_EQ(work_dir_pattern(), "/tmp/acspeed-tune-XXXXXX");
}

}  // namespace
}  // namespace acspeed::tuner
