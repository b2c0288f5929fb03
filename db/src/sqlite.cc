#include "sqlite.h"

#include "acspeed/error.h"

namespace acspeed::sqlite {

Connection::Connection(const std::string& uri_or_path, int flags, const std::string& name)
    : name_(name) {
  const int rc = sqlite3_open_v2(uri_or_path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    ACS_THROW(StoreError, "cannot open store {}: {}", name_, message);
  }
  sqlite3_extended_result_codes(db_, 1);
}

Connection::~Connection() { sqlite3_close_v2(db_); }

void Connection::set_busy_timeout(int ms) {
  busy_timeout_ms_ = ms;
  sqlite3_busy_timeout(db_, ms);
}

void Connection::fail(const std::string& what, int code) const {
  const int primary = code & 0xff;
  if (primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT) {
    ACS_THROW(StoreError, "store {} is corrupt or not an acspeed store ({}); it was left unchanged",
              name_, sqlite3_errmsg(db_));
  }
  if (primary == SQLITE_BUSY) {
    ACS_THROW(StoreError,
              "store {} stayed locked by another process past the busy timeout ({} ms, "
              "ACSPEED_BUSY_TIMEOUT_MS): {}",
              name_, busy_timeout_ms_, sqlite3_errmsg(db_));
  }
  if (primary == SQLITE_FULL) {
    ACS_THROW(StoreError,
              "cannot write to store {}: the disk is full ({}); this write was rolled back and the store "
              "keeps what it held before",
              name_, sqlite3_errmsg(db_));
  }
  ACS_THROW(StoreError, "{} on store {}: {}", what, name_, sqlite3_errmsg(db_));
}

void Connection::exec(const char* sql) const {
  char* error = nullptr;
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &error);
  sqlite3_free(error);
  if (rc != SQLITE_OK) fail(fmt::format("'{}' failed", sql), rc);
}

Statement::Statement(const Connection& db, const char* sql) : db_(db) {
  const int rc = sqlite3_prepare_v2(db.handle(), sql, -1, &stmt_, nullptr);
  if (rc != SQLITE_OK) db.fail(fmt::format("preparing '{}' failed", sql), rc);
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

int Statement::parameter(const std::string& name) const {
  const int index = sqlite3_bind_parameter_index(stmt_, (":" + name).c_str());
  if (index == 0) ACS_THROW(StoreError, "statement '{}' has no parameter :{}", sqlite3_sql(stmt_), name);
  return index;
}

Statement& Statement::bind(const std::string& name, int64_t value) {
  sqlite3_bind_int64(stmt_, parameter(name), value);
  return *this;
}
Statement& Statement::bind(const std::string& name, double value) {
  sqlite3_bind_double(stmt_, parameter(name), value);
  return *this;
}
Statement& Statement::bind(const std::string& name, const std::string& value) {
  sqlite3_bind_text(stmt_, parameter(name), value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::bind(const std::string& name, const std::optional<double>& value) {
  if (value) return bind(name, *value);
  sqlite3_bind_null(stmt_, parameter(name));
  return *this;
}
Statement& Statement::bind(const std::string& name, const std::optional<int64_t>& value) {
  if (value) return bind(name, *value);
  sqlite3_bind_null(stmt_, parameter(name));
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_.fail(fmt::format("'{}' failed", sqlite3_sql(stmt_)), rc);
}

void Statement::run() {
  while (step()) {
  }
}

int Statement::column(const std::string& name) const {
  const int count = sqlite3_column_count(stmt_);
  for (int i = 0; i < count; ++i) {
    if (name == sqlite3_column_name(stmt_, i)) return i;
  }
  ACS_THROW(StoreError, "statement '{}' returns no column {}", sqlite3_sql(stmt_), name);
}

int64_t Statement::int64(const std::string& name) const { return sqlite3_column_int64(stmt_, column(name)); }
double Statement::real(const std::string& name) const { return sqlite3_column_double(stmt_, column(name)); }
bool Statement::is_null(const std::string& name) const {
  return sqlite3_column_type(stmt_, column(name)) == SQLITE_NULL;
}
std::string Statement::text(const std::string& name) const {
  const auto* data = sqlite3_column_text(stmt_, column(name));
  return data ? std::string(reinterpret_cast<const char*>(data)) : std::string();
}

WriteTransaction::WriteTransaction(const Connection& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }

WriteTransaction::~WriteTransaction() {
  if (!done_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void WriteTransaction::commit() {
  db_.exec("COMMIT");
  done_ = true;
}

}  // namespace acspeed::sqlite
