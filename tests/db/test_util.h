// Helpers for the store tests: temporary folders, file bytes, one stored value read with SQLite
// itself, a sample decision, and running a
// check as an unprivileged user (root ignores file modes, so read-only cases drop privileges).
#pragma once

#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include "acspeed/store.h"

namespace acspeed::testing {

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/acspeed-test-XXXXXX";
    path_ = mkdtemp(pattern);
    std::filesystem::permissions(path_, std::filesystem::perms::all);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The first column of the first row `sql` selects, read straight from the file at `path` (read-only),
// as text; "" when there is no row.
inline std::string stored_text(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sql;
  std::string text = sqlite3_step(stmt) == SQLITE_ROW ? reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)) : "";
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return text;
}

inline Decision sample_decision(const std::string& precision = "amp", int streams = 2) {
  Decision d;
  d.key = {"cpu-2xTest", "p2-00000000deadbeef", precision, 2, 1};
  d.model_name = "resnet18";
  d.config.bucket_cap_mb = 5;
  d.config.streams = streams;
  d.torch_version = "2.15.0";
  d.batch_size = 32;
  d.speedup = 1.4;
  d.ci_low = 1.2;
  d.ci_high = 1.6;
  return d;
}

// Runs `check` in a child process as user nobody (when root) and returns its exit status.
inline int run_unprivileged(const std::function<int()>& check) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (geteuid() == 0 && (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)) _exit(99);
    int rc = 98;
    try {
      rc = check();
    } catch (...) {
      rc = 97;
    }
    _exit(rc);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 96;
}

}  // namespace acspeed::testing
