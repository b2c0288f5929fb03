#include "acspeed/python_interpreter.h"

#include <unistd.h>

#include <filesystem>

#include "acspeed/settings.h"

namespace acspeed {
namespace fs = std::filesystem;
namespace {

std::string this_program() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "" : self.string();
}

}  // namespace

std::string installed_package_root_for(const std::string& program) {
  if (program.empty()) return "";
  const fs::path bin = fs::path(program).parent_path();  // <root>/acspeed/bin
  const fs::path package = bin.parent_path();             // <root>/acspeed
  std::error_code ec;
  if (bin.filename() != "bin" || package.filename() != "acspeed" ||
      !fs::is_regular_file(package / "__init__.py", ec)) {
    return "";
  }
  return package.parent_path().string();
}

std::string installed_python_for(const std::string& program) {
  const std::string root = installed_package_root_for(program);
  if (root.empty()) return "";
  const fs::path site = root;                       // <prefix>/lib/pythonX.Y/site-packages
  const fs::path versioned = site.parent_path();    // <prefix>/lib/pythonX.Y
  const fs::path prefix = versioned.parent_path().parent_path();
  if (versioned.filename().string().rfind("python", 0) != 0 || versioned.parent_path().filename() != "lib") {
    return "";
  }
  const fs::path python = prefix / "bin" / versioned.filename();
  return ::access(python.c_str(), X_OK) == 0 ? python.string() : "";
}

std::string python_interpreter() {
  if (auto python = setting_string("ACSPEED_PYTHON")) return *python;
  if (std::string installed = installed_python_for(this_program()); !installed.empty()) return installed;
  return "python3";
}

std::string python_source_dir() { return installed_package_root_for(this_program()); }

}  // namespace acspeed
