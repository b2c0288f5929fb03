// db/schema.sql is the store's schema as a migrated store holds it.
#include <sqlite3.h>

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <string>

#include "acspeed/store.h"
#include "test_util.h"

namespace acspeed {
namespace {
using testing::TempDir;

// A CREATE statement with comments, quotes around names and layout taken out: SQLite keeps each
// statement's text as written (an ALTER TABLE appends to it), so only the words are compared.
std::string words(std::string sql) {
  sql = std::regex_replace(sql, std::regex("--[^\n]*"), " ");
  sql = std::regex_replace(sql, std::regex("\""), "");
  sql = std::regex_replace(sql, std::regex("\\s+"), " ");
  sql = std::regex_replace(sql, std::regex(" ?([(),]) ?"), "$1");
  return std::regex_replace(sql, std::regex("^ | $"), "");
}

struct Schema {
  int version = -1;
  // "type name (on table)" -> its statement's words; SQLite's own objects (sqlite_sequence,
  // automatic indexes) are left out.
  std::map<std::string, std::string> objects;
};

Schema schema_of(sqlite3* db) {
  Schema out;
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db,
                               "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'",
                               -1, &stmt, nullptr),
            SQLITE_OK);
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    auto text = [&](int column) { return std::string(reinterpret_cast<const char*>(sqlite3_column_text(stmt, column))); };
    out.objects[text(0) + " " + text(1) + " (on " + text(2) + ")"] = words(text(3));
  }
  sqlite3_finalize(stmt);
  EXPECT_EQ(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &stmt, nullptr), SQLITE_OK);
  EXPECT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  out.version = sqlite3_column_int(stmt, 0);
  sqlite3_finalize(stmt);
  return out;
}

TEST(StoreSchema, SchemaFileIsWhatEveryMigrationMakes) {
  TempDir dir;
  const auto path = dir.file("migrated.db");
  ASSERT_EQ(Store::open({path, false})->schema_version(), kStoreSchemaVersion);
  sqlite3* migrated = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &migrated, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  const Schema expected = schema_of(migrated);
  sqlite3_close(migrated);

  const std::string file = testing::read_bytes(ACSPEED_SCHEMA_SQL);
  ASSERT_FALSE(file.empty()) << "cannot read " << ACSPEED_SCHEMA_SQL;
  sqlite3* fresh = nullptr;
  ASSERT_EQ(sqlite3_open(":memory:", &fresh), SQLITE_OK);
  char* error = nullptr;
  ASSERT_EQ(sqlite3_exec(fresh, file.c_str(), nullptr, nullptr, &error), SQLITE_OK) << ACSPEED_SCHEMA_SQL << ": " << error;
  const Schema written = schema_of(fresh);
  sqlite3_close(fresh);

  EXPECT_EQ(written.version, kStoreSchemaVersion) << ACSPEED_SCHEMA_SQL << " must end with its PRAGMA user_version";
  EXPECT_EQ(expected.objects.size(), 7u);  // four tables, three indexes
  for (const auto& [object, sql] : expected.objects) {
    const auto it = written.objects.find(object);
    if (it == written.objects.end()) {
      ADD_FAILURE() << ACSPEED_SCHEMA_SQL << " lacks the " << object << " a migrated store has: " << sql;
    } else {
      EXPECT_EQ(it->second, sql) << object << " differs between " << ACSPEED_SCHEMA_SQL << " and a migrated store";
    }
  }
  for (const auto& [object, sql] : written.objects) {
    EXPECT_TRUE(expected.objects.count(object)) << ACSPEED_SCHEMA_SQL << " has " << object
                                                << " that no migration makes: " << sql;
  }
}

TEST(StoreSchema, WordsIgnoreLayoutCommentsAndQuotesButNotTheStatement) {
  EXPECT_EQ(words("CREATE TABLE \"t\"(\n  a TEXT, -- why\n  b INTEGER)"), "CREATE TABLE t(a TEXT,b INTEGER)");
  EXPECT_EQ(words("CREATE TABLE t(a TEXT,\n b INTEGER NOT NULL)"), "CREATE TABLE t(a TEXT,b INTEGER NOT NULL)");
  EXPECT_NE(words("CREATE TABLE t(a TEXT, b INTEGER)"), words("CREATE TABLE t(a TEXT, b REAL)"));
}

}  // namespace
}  // namespace acspeed
