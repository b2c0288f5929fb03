// A thin RAII layer over the SQLite C API (private to db/): a connection, prepared statements with
// typed binds and columns, and a transaction guard. Errors throw StoreError naming the file.
// Parameters and columns are named, never numbered: a statement writes `:name` for each parameter
// and binds it as bind("name", value); a row's values are read by the name the SELECT gives them.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>

namespace acspeed::sqlite {

class Connection;

class Statement {
 public:
  Statement(const Connection& db, const char* sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binds parameter `:name`; a name the statement does not have is an error.
  Statement& bind(const std::string& name, int64_t value);
  Statement& bind(const std::string& name, double value);
  Statement& bind(const std::string& name, const std::string& value);
  Statement& bind(const std::string& name, const std::optional<double>& value);
  Statement& bind(const std::string& name, const std::optional<int64_t>& value);
  // Advances to the next row; false when done.
  bool step();
  // Runs a statement that returns no rows.
  void run();

  // The current row's value of column `name` (NULL reads as 0 / ""); a name the result does not
  // have is an error.
  int64_t int64(const std::string& name) const;
  double real(const std::string& name) const;
  std::string text(const std::string& name) const;
  bool is_null(const std::string& name) const;

 private:
  int parameter(const std::string& name) const;
  int column(const std::string& name) const;

  const Connection& db_;
  sqlite3_stmt* stmt_ = nullptr;
};

class Connection {
 public:
  // flags: SQLITE_OPEN_* ; `name` is the file as the user knows it (for messages).
  Connection(const std::string& uri_or_path, int flags, const std::string& name);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void exec(const char* sql) const;
  sqlite3* handle() const { return db_; }
  const std::string& name() const { return name_; }
  int64_t last_insert_id() const { return sqlite3_last_insert_rowid(db_); }
  int changes() const { return sqlite3_changes(db_); }
  // How long a statement waits for a lock another connection holds before failing SQLITE_BUSY.
  void set_busy_timeout(int ms);
  // Throws StoreError: "<what> on store <name>: <sqlite message>"; a corrupt file, a lock held past
  // the busy timeout and a full disk each get a message of their own.
  [[noreturn]] void fail(const std::string& what, int code) const;

 private:
  sqlite3* db_ = nullptr;
  std::string name_;
  int busy_timeout_ms_ = 0;
};

// BEGIN IMMEDIATE on construction (takes the write lock up front, so concurrent writers queue on
// the busy timeout instead of failing on upgrade); ROLLBACK unless commit() was called.
class WriteTransaction {
 public:
  explicit WriteTransaction(const Connection& db);
  ~WriteTransaction();
  WriteTransaction(const WriteTransaction&) = delete;
  WriteTransaction& operator=(const WriteTransaction&) = delete;
  void commit();

 private:
  const Connection& db_;
  bool done_ = false;
};

}  // namespace acspeed::sqlite
