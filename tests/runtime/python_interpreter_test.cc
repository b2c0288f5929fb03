// How an installed program finds its package and its environment's interpreter: from its own path,
// never from a path recorded at build time.
#include "acspeed/python_interpreter.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace acspeed {
namespace {
namespace fs = std::filesystem;

class InstalledLayout : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/acspeed-layout-XXXXXX";
    root_ = mkdtemp(pattern);
    site_ = root_ / "venv" / "lib" / "python3.12" / "site-packages";
    fs::create_directories(site_ / "acspeed" / "bin");
    std::ofstream(site_ / "acspeed" / "__init__.py") << "";
    program_ = (site_ / "acspeed" / "bin" / "acspeed-tune").string();
    fs::create_directories(root_ / "venv" / "bin");
    python_ = root_ / "venv" / "bin" / "python3.12";
  }
  void TearDown() override { fs::remove_all(root_); }
  void make_python(mode_t mode) {
    std::ofstream(python_) << "#!/bin/sh\n";
    chmod(python_.c_str(), mode);
  }
  fs::path root_, site_, python_;
  std::string program_;
};

TEST_F(InstalledLayout, ProgramInAPackageFindsTheSitePackagesAboveIt) {
  EXPECT_EQ(installed_package_root_for(program_), site_.string());
}

TEST_F(InstalledLayout, InterpreterIsTheEnvironmentsVersionedPython) {
  make_python(0755);
  EXPECT_EQ(installed_python_for(program_), python_.string());
}

TEST_F(InstalledLayout, NoExecutableInterpreterMeansNone) {
  EXPECT_EQ(installed_python_for(program_), "");  // missing
  make_python(0644);
  EXPECT_EQ(installed_python_for(program_), "");  // not executable
}

TEST_F(InstalledLayout, ABinFolderWithoutThePackageIsNotInstalled) {
  fs::remove(site_ / "acspeed" / "__init__.py");
  EXPECT_EQ(installed_package_root_for(program_), "");
  const fs::path build_bin = root_ / "build" / "bin";
  fs::create_directories(build_bin);
  EXPECT_EQ(installed_package_root_for((build_bin / "acspeed-tune").string()), "");
  EXPECT_EQ(installed_package_root_for(""), "");
}

TEST_F(InstalledLayout, APackageOutsideLibPythonHasNoInterpreterButIsStillFound) {
  const fs::path other = root_ / "opt" / "acspeed";
  fs::create_directories(other / "bin");
  std::ofstream(other / "__init__.py") << "";
  const std::string program = (other / "bin" / "acspeed-tune").string();
  EXPECT_EQ(installed_package_root_for(program), (root_ / "opt").string());
  EXPECT_EQ(installed_python_for(program), "");
}

TEST(PythonInterpreter, AcspeedPythonWinsAndTheBuildFoldersProgramFallsBackToPath) {
  setenv("ACSPEED_PYTHON", "/opt/py/bin/python3", 1);
  EXPECT_EQ(python_interpreter(), "/opt/py/bin/python3");
  unsetenv("ACSPEED_PYTHON");
  EXPECT_EQ(python_interpreter(), "python3");  // this test program lives in the build folder
  EXPECT_EQ(python_source_dir(), "");
}

}  // namespace
}  // namespace acspeed
