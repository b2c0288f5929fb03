// Each way a store can be unusable: a clear StoreError naming the file, and the file unchanged.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include "acspeed/error.h"
#include "acspeed/store.h"
#include "test_util.h"

namespace acspeed {
namespace {
namespace fs = std::filesystem;
using testing::read_bytes;
using testing::run_unprivileged;
using testing::sample_decision;
using testing::TempDir;

std::string open_error(const std::string& path, bool read_only = false) {
  try {
    Store::open({path, read_only});
  } catch (const StoreError& e) {
    return e.what();
  }
  return "";
}

void set_user_version(const std::string& path, int version) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, fmt::format("PRAGMA user_version = {}", version).c_str(), nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
}

TEST(StoreFailures, ForeignFileIsRefusedAndLeftByteForByte) {
  TempDir dir;
  const auto path = dir.file("acspeed.db");
  { std::ofstream(path) << "this is my thesis, not a database\n"; }
  const auto before = read_bytes(path);
  for (bool read_only : {false, true}) {
    const auto error = open_error(path, read_only);
    EXPECT_NE(error.find(path), std::string::npos) << error;
    EXPECT_NE(error.find("not an acspeed store"), std::string::npos) << error;
  }
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_FALSE(fs::exists(path + "-wal"));
  EXPECT_FALSE(fs::exists(path + "-shm"));
}

TEST(StoreFailures, CorruptDatabaseIsRefusedAndLeftByteForByte) {
  TempDir dir;
  const auto path = dir.file("acspeed.db");
  std::string bytes(4096, '\x5a');
  std::memcpy(bytes.data(), "SQLite format 3\0", 16);  // a valid header over garbage pages
  { std::ofstream(path, std::ios::binary) << bytes; }
  const auto error = open_error(path);
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find("corrupt"), std::string::npos) << error;
  EXPECT_EQ(read_bytes(path), bytes);
}

TEST(StoreFailures, OtherSqliteDatabaseIsNotMistakenForAStore) {
  TempDir dir;
  const auto path = dir.file("other.db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "CREATE TABLE photos(id INTEGER)", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  const auto before = read_bytes(path);
  EXPECT_NE(open_error(path, /*read_only=*/true).find("not an acspeed store"), std::string::npos);
  EXPECT_EQ(read_bytes(path), before);
}

TEST(StoreFailures, NewerSchemaReadsButRefusesWrites) {
  TempDir dir;
  const auto path = dir.file("acspeed.db");
  { Store::open({path, false})->add_decision(sample_decision()); }
  set_user_version(path, kStoreSchemaVersion + 1);
  auto store = Store::open({path, false});
  EXPECT_TRUE(store->read_only());
  EXPECT_NE(store->read_only_reason().find("newer than this build"), std::string::npos);
  EXPECT_EQ(store->decisions().size(), 1u);  // reads continue
  try {
    store->add_decision(sample_decision());
    FAIL() << "write to a newer-schema store accepted";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
  EXPECT_EQ(store->decisions().size(), 1u);
}

TEST(StoreFailures, ReadOnlyFileLooksUpAndRefusesWrites) {
  TempDir dir;
  const auto path = dir.file("acspeed.db");
  { Store::open({path, false})->add_decision(sample_decision()); }
  chmod(path.c_str(), 0444);
  const auto before = read_bytes(path);
  const int rc = run_unprivileged([&] {
    auto store = Store::open({path, false});
    if (!store->read_only()) return 1;
    if (store->decisions().size() != 1) return 2;
    if (!store->active_decision(sample_decision().key)) return 3;
    try {
      store->add_decision(sample_decision());
      return 4;
    } catch (const StoreError&) {
    }
    return 0;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(read_bytes(path), before);
}

TEST(StoreFailures, ReadOnlyFolderReadsWalStoreAsImmutable) {
  TempDir dir;
  const auto folder = dir.path() / "ro";
  fs::create_directory(folder);
  const auto path = (folder / "acspeed.db").string();
  { Store::open({path, false})->add_decision(sample_decision()); }
  ASSERT_FALSE(fs::exists(path + "-shm"));  // cleaned up when the last connection closed
  chmod(folder.c_str(), 0555);
  const auto before = read_bytes(path);
  const int rc = run_unprivileged([&] {
    auto store = Store::open({path, true});
    if (!store->read_only()) return 1;
    if (!store->active_decision(sample_decision().key)) return 2;
    auto writable = Store::open({path, false});  // asks to write: opened read-only, writes refused
    try {
      writable->add_decision(sample_decision());
      return 3;
    } catch (const StoreError&) {
    }
    return 0;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_FALSE(fs::exists(path + "-shm"));
}

TEST(StoreFailures, ReadOnlyLookupNeverCreatesAStore) {
  TempDir dir;
  const auto path = dir.file("missing/acspeed.db");
  auto store = Store::open({path, true});
  EXPECT_FALSE(store->exists());
  EXPECT_TRUE(store->decisions().empty());
  EXPECT_FALSE(fs::exists(dir.path() / "missing"));
}

TEST(StoreFailures, NetworkFileSystemsAreRecognised) {
  EXPECT_TRUE(is_network_filesystem(0x6969));      // NFS
  EXPECT_TRUE(is_network_filesystem(0xFF534D42));  // CIFS
  EXPECT_TRUE(is_network_filesystem(0x65735546));  // FUSE (sshfs...)
  EXPECT_FALSE(is_network_filesystem(0xEF53));     // ext4
  EXPECT_FALSE(is_network_filesystem(0x01021994)); // tmpfs
  EXPECT_FALSE(is_network_filesystem(0x9123683E)); // btrfs
}

TEST(StoreFailures, DirectoryIsNotAStore) {
  TempDir dir;
  EXPECT_NE(open_error(dir.path().string()).find("is a directory"), std::string::npos);
}

}  // namespace
}  // namespace acspeed
