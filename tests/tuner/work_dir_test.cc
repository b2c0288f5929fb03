// The tuner's work folder (worker_launch.h): in the temporary directory a user names with TMPDIR,
// else /tmp, and in /tmp when TMPDIR is no folder or too long a path for the control socket inside it.
#include <stdlib.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "../support/scoped_env.h"
#include "worker_launch.h"

namespace acspeed::tuner {
namespace {

using testing::ScopedEnv;

TEST(WorkDir, TheWorkFolderIsMadeInTmpdir) {
  char folder[] = "/tmp/acspeed-tmpdir-XXXXXX";
  ASSERT_NE(mkdtemp(folder), nullptr);
  const ScopedEnv tmpdir("TMPDIR", folder);
  EXPECT_EQ(work_dir_pattern(), std::string(folder) + "/acspeed-tune-XXXXXX");
  const std::string made = make_work_dir();
  EXPECT_EQ(std::filesystem::path(made).parent_path(), std::filesystem::path(folder));
  EXPECT_TRUE(std::filesystem::is_directory(made));
  std::filesystem::remove_all(folder);
}

TEST(WorkDir, WithoutTmpdirTheWorkFolderIsInTmp) {
  const ScopedEnv tmpdir("TMPDIR", nullptr);
  EXPECT_EQ(work_dir_pattern(), "/tmp/acspeed-tune-XXXXXX");
}

TEST(WorkDir, ATmpdirTooLongForTheControlSocketFallsBackToTmp) {
  // 90 bytes of folder + "/acspeed-tune-XXXXXX/control.sock" is past a Unix socket's 107.
  const std::string folder = "/tmp/" + std::string(85, 'd');
  ASSERT_TRUE(std::filesystem::create_directories(folder) || std::filesystem::is_directory(folder));
  const ScopedEnv tmpdir("TMPDIR", folder.c_str());
  EXPECT_EQ(work_dir_pattern(), "/tmp/acspeed-tune-XXXXXX");
  std::filesystem::remove(folder);
}

TEST(WorkDir, ATmpdirThatIsNoFolderFallsBackToTmp) {
  const ScopedEnv tmpdir("TMPDIR", "/nonexistent-acspeed-tmpdir");
  EXPECT_EQ(work_dir_pattern(), "/tmp/acspeed-tune-XXXXXX");
}

}  // namespace
}  // namespace acspeed::tuner
