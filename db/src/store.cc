#include "acspeed/store.h"

#include <fcntl.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "acspeed/error.h"
#include "acspeed/log.h"
#include "acspeed/settings.h"
#include "rows.h"
#include "schema.h"
#include "sqlite.h"

namespace acspeed {
namespace fs = std::filesystem;

namespace {

struct NamedFs {
  int64_t magic;
  const char* name;
};
constexpr NamedFs kNetworkFilesystems[] = {
    {0x6969, "nfs"},          {0x517B, "smb"},          {0xFF534D42, "cifs"},
    {0xFE534D42, "smb2"},     {0x65735546, "fuse"},     {0x0BD00BD0, "lustre"},
    {0x47504653, "gpfs"},     {0x00C36400, "ceph"},     {0x5346414F, "afs"},
    {0x01021997, "9p"},       {0x013111A8, "ibrix"},    {0x6B414653, "kafs"},
    {0x73757245, "coda"},     {0x564C, "ncp"},          {0x19830326, "fhgfs/beegfs"},
};

const char* network_fs_name(int64_t magic) {
  for (const auto& entry : kNetworkFilesystems) {
    if (entry.magic == magic) return entry.name;
  }
  return nullptr;
}

// The nearest existing ancestor of `path` (the path itself if it exists).
fs::path existing_ancestor(fs::path path) {
  std::error_code ec;
  path = fs::absolute(path, ec);
  while (!path.empty() && !fs::exists(path, ec)) {
    if (path == path.parent_path()) break;
    path = path.parent_path();
  }
  return path;
}

void refuse_network_filesystem(const std::string& path) {
  const auto ancestor = existing_ancestor(path);
  struct statfs info {};
  if (statfs(ancestor.c_str(), &info) != 0) return;
  if (const char* name = network_fs_name(static_cast<int64_t>(info.f_type))) {
    ACS_THROW(StoreError,
              "store {} is on a network file system ({}): SQLite's WAL needs local file locking, so "
              "acspeed refuses it; set ACSPEED_DB to a path on a local disk",
              path, name);
  }
}

// Checks the first bytes before SQLite touches the file: a foreign file is never opened read-write.
void check_sqlite_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ACS_THROW(StoreError, "cannot read store {}: {}", path, std::strerror(errno));
  char header[16] = {0};
  in.read(header, sizeof(header));
  const auto got = in.gcount();
  if (got == 0) return;  // an empty file is an empty database
  if (got < 16 || std::string(header, 16) != std::string("SQLite format 3\0", 16)) {
    ACS_THROW(StoreError,
              "store {} is not an acspeed store (not a SQLite database); it was left unchanged. "
              "Move it away or point ACSPEED_DB elsewhere",
              path);
  }
}

}  // namespace

bool is_network_filesystem(int64_t fs_type) { return network_fs_name(fs_type) != nullptr; }

std::string default_store_path() {
  if (auto path = setting_string("ACSPEED_DB")) return *path;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) {
    return (fs::path(xdg) / "acspeed" / "acspeed.db").string();
  }
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') {
    ACS_THROW(StoreError, "cannot locate the store: neither ACSPEED_DB, XDG_DATA_HOME nor HOME is set");
  }
  return (fs::path(home) / ".local" / "share" / "acspeed" / "acspeed.db").string();
}

struct Store::Impl {
  std::string path;
  std::unique_ptr<sqlite::Connection> db;  // null when read-only and no store exists yet
  std::string read_only_reason;
  int version = 0;

  void require_writable(const char* what) const {
    if (!read_only_reason.empty()) {
      ACS_THROW(StoreError, "cannot {}: store {} is read-only ({})", what, path, read_only_reason);
    }
  }
  const sqlite::Connection& conn() const { return *db; }

  int read_version() const {
    sqlite::Statement stmt(*db, "SELECT user_version FROM pragma_user_version");
    stmt.step();
    return static_cast<int>(stmt.int64("user_version"));
  }

  // Switches to WAL and applies pending migrations, each in its own write transaction; concurrent
  // openers serialise on the write lock and re-read the version inside it.
  void migrate() {
    for (int attempt = 0;; ++attempt) {
      const int rc = sqlite3_exec(db->handle(), "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) break;
      if ((rc & 0xff) != SQLITE_BUSY || attempt > 200) db->fail("enabling WAL failed", rc);
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    for (const auto& migration : migrations()) {
      sqlite::WriteTransaction tx(*db);
      const int current = read_version();
      if (current >= migration.to_version) continue;
      ACS_INFO("store {}: migrating schema {} -> {} ({})", path, current, migration.to_version,
               migration.description);
      db->exec(migration.sql);
      db->exec(fmt::format("PRAGMA user_version = {}", migration.to_version).c_str());
      tx.commit();
    }
    version = read_version();
  }

  // A store of an older schema read without migrating (a training job's lookup never migrates, the
  // read-only commands neither) lacks the columns later migrations added: they read as schema.h says.
  // "SELECT <every column of Row> FROM <its table> <rest>".
  template <class Row>
  std::string select(const std::string& rest) const {
    return fmt::format("SELECT {} FROM {} {}", rows::select_list<Row>(absent_columns(Row::kTable, version)),
                       Row::kTable, rest);
  }
  // The decisions' gpus_shared column (schema 4), or what rows of an older store read as.
  std::string gpus_shared_column() const {
    const auto absent = absent_columns("decisions", version);
    const auto it = absent.find("gpus_shared");
    return it == absent.end() ? "gpus_shared" : it->second;
  }

  void read_session(const sqlite::Statement& stmt, SessionRecord& session) const {
    try {
      rows::read<rows::SessionRow>(stmt, session);
    } catch (const InvalidArgument& e) {
      ACS_THROW(StoreError, "session {} in store {} is unreadable: {}", stmt.int64("id"), path, e.what());
    }
  }

  // Clears the active flag of the key's active decision (inside the caller's transaction).
  void deactivate(const DecisionKey& key) const {
    sqlite::Statement clear(*db, fmt::format("UPDATE decisions SET active = 0 WHERE {} AND active = 1",
                                             rows::equal_clause<rows::DecisionKeyRow>()).c_str());
    rows::bind<rows::DecisionKeyRow>(clear, key);
    clear.run();
  }
};

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::~Store() = default;

std::unique_ptr<Store> Store::open(const StoreOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->path = options.path.empty() ? default_store_path() : options.path;
  const std::string& path = impl->path;
  refuse_network_filesystem(path);
  const int busy_timeout_ms = options.busy_timeout_ms.value_or(
      static_cast<int>(setting_int("ACSPEED_BUSY_TIMEOUT_MS").value_or(15000)));

  std::error_code ec;
  const bool exists = fs::exists(path, ec);
  if (ec) ACS_THROW(StoreError, "cannot access store {}: {}", path, ec.message());
  if (exists) {
    if (fs::is_directory(path, ec)) ACS_THROW(StoreError, "store {} is a directory, not a file", path);
    check_sqlite_header(path);
  }
  const fs::path folder = fs::absolute(path, ec).parent_path();
  bool read_only = options.read_only;
  if (exists && (access(path.c_str(), W_OK) != 0 || access(folder.c_str(), W_OK) != 0)) {
    read_only = true;
    impl->read_only_reason = access(path.c_str(), W_OK) != 0 ? "the file is not writable"
                                                              : "its folder is not writable";
  } else if (options.read_only) {
    impl->read_only_reason = "opened for reading";
  }

  if (!exists) {
    if (read_only) return std::unique_ptr<Store>(new Store(std::move(impl)));
    fs::create_directories(folder, ec);
    if (ec) ACS_THROW(StoreError, "cannot create the folder {} for store {}: {}", folder.string(), path, ec.message());
  }

  if (read_only) {
    impl->db = std::make_unique<sqlite::Connection>(path, SQLITE_OPEN_READONLY, path);
    impl->db->set_busy_timeout(busy_timeout_ms);
    try {
      impl->version = impl->read_version();
    } catch (const StoreError&) {
      // A WAL store whose -shm cannot be created in a read-only folder: read it as immutable.
      if (access(folder.c_str(), W_OK) == 0) throw;
      impl->db = std::make_unique<sqlite::Connection>(
          "file:" + fs::absolute(path).string() + "?immutable=1", SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
          path);
      impl->version = impl->read_version();
      impl->read_only_reason += "; read as immutable";
    }
  } else {
    impl->db = std::make_unique<sqlite::Connection>(
        path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, path);
    impl->db->set_busy_timeout(busy_timeout_ms);
    impl->version = impl->read_version();  // a corrupt file fails here, before anything is written
    if (impl->version < kStoreSchemaVersion) impl->migrate();
    impl->db->exec("PRAGMA foreign_keys=ON");
  }
  if (impl->version > kStoreSchemaVersion) {
    impl->read_only_reason = fmt::format(
        "its schema version {} is newer than this build's {}: reads continue, writes are refused; "
        "upgrade acspeed",
        impl->version, kStoreSchemaVersion);
  } else if (impl->version == 0) {
    // Only reachable read-only (a writable store was migrated above): an empty SQLite file holds
    // nothing yet (or is being created by a writer right now); any other SQLite database is not
    // ours. Version and tables are read in one statement, so a migration committing in between
    // cannot make a store look foreign.
    sqlite::Statement tables(*impl->db,
                             "SELECT (SELECT user_version FROM pragma_user_version) AS version, count(*) AS objects "
                             "FROM sqlite_master");
    tables.step();
    impl->version = static_cast<int>(tables.int64("version"));
    if (impl->version == 0 && tables.int64("objects") != 0) {
      ACS_THROW(StoreError, "store {} is a SQLite database but not an acspeed store; it was left unchanged",
                path);
    }
    if (impl->version == 0) impl->db.reset();
  }
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

const std::string& Store::path() const { return impl_->path; }
bool Store::read_only() const { return !impl_->read_only_reason.empty(); }
const std::string& Store::read_only_reason() const { return impl_->read_only_reason; }
int Store::schema_version() const { return impl_->version; }
bool Store::exists() const { return impl_->db != nullptr; }

void Store::record_instance_type(const Fingerprint& fp) {
  impl_->require_writable("record the instance type");
  sqlite::WriteTransaction tx(impl_->conn());
  sqlite::Statement stmt(impl_->conn(), fmt::format(
      "{} ON CONFLICT(key) DO UPDATE SET explicit_name = excluded.explicit_name, "
      "detected_key = excluded.detected_key, details_json = excluded.details_json, last_seen = excluded.last_seen",
      rows::insert_sql<rows::InstanceTypeRow>()).c_str());
  InstanceTypeRecord row;
  row.key = fp.instance_type;
  row.explicit_name = fp.explicit_name;
  row.detected_key = fp.detected_key;
  row.details_json = nlohmann::json(fp.details).dump();
  rows::bind<rows::InstanceTypeRow>(stmt, row);
  stmt.run();
  tx.commit();
}

std::vector<InstanceTypeRecord> Store::instance_types() const {
  std::vector<InstanceTypeRecord> out;
  if (!exists()) return out;
  sqlite::Statement stmt(impl_->conn(), impl_->select<rows::InstanceTypeRow>("ORDER BY key").c_str());
  while (stmt.step()) rows::read<rows::InstanceTypeRow>(stmt, out.emplace_back());
  return out;
}

int64_t Store::create_session(const SessionRecord& s) {
  impl_->require_writable("create a tuning session");
  sqlite::WriteTransaction tx(impl_->conn());
  sqlite::Statement stmt(impl_->conn(), rows::insert_sql<rows::SessionRow>().c_str());
  rows::bind<rows::SessionRow>(stmt, s);
  stmt.run();
  const int64_t id = impl_->conn().last_insert_id();
  tx.commit();
  return id;
}

void Store::finish_session(int64_t session_id, SessionStatus status) {
  impl_->require_writable("finish a tuning session");
  sqlite::WriteTransaction tx(impl_->conn());
  sqlite::Statement stmt(impl_->conn(),
                         fmt::format("UPDATE sessions SET status = :status, finished_at = {} WHERE id = :id",
                                     rows::kNow).c_str());
  stmt.bind("status", std::string(to_string(status))).bind("id", session_id).run();
  if (impl_->conn().changes() == 0) ACS_THROW(StoreError, "no tuning session {} in store {}", session_id, impl_->path);
  tx.commit();
}

std::optional<SessionRecord> Store::session(int64_t session_id) const {
  if (!exists()) return std::nullopt;
  sqlite::Statement stmt(impl_->conn(), impl_->select<rows::SessionRow>("WHERE id = :id").c_str());
  stmt.bind("id", session_id);
  if (!stmt.step()) return std::nullopt;
  SessionRecord session;
  impl_->read_session(stmt, session);
  return session;
}

std::vector<SessionRecord> Store::sessions() const {
  std::vector<SessionRecord> out;
  if (!exists()) return out;
  sqlite::Statement stmt(impl_->conn(), impl_->select<rows::SessionRow>("ORDER BY id").c_str());
  while (stmt.step()) impl_->read_session(stmt, out.emplace_back());
  return out;
}

int64_t Store::add_trial(const TrialRecord& t) {
  impl_->require_writable("record a trial");
  sqlite::WriteTransaction tx(impl_->conn());
  sqlite::Statement stmt(impl_->conn(), rows::insert_sql<rows::TrialRow>().c_str());
  rows::bind<rows::TrialRow>(stmt, t);
  stmt.run();
  const int64_t id = impl_->conn().last_insert_id();
  tx.commit();
  return id;
}

std::vector<TrialRecord> Store::trials(int64_t session_id) const {
  std::vector<TrialRecord> out;
  if (!exists()) return out;
  sqlite::Statement stmt(impl_->conn(),
                         impl_->select<rows::TrialRow>("WHERE session_id = :session_id ORDER BY ordinal, id").c_str());
  stmt.bind("session_id", session_id);
  while (stmt.step()) {
    try {
      rows::read<rows::TrialRow>(stmt, out.emplace_back());
    } catch (const InvalidArgument& e) {
      ACS_THROW(StoreError, "trial {} in store {} is unreadable: {}", stmt.int64("id"), impl_->path, e.what());
    }
  }
  return out;
}

int64_t Store::add_decision(const Decision& d, bool activate) {
  impl_->require_writable("store a decision");
  d.config.validate();
  sqlite::WriteTransaction tx(impl_->conn());
  if (activate) {
    impl_->deactivate(d.key);
  }
  Decision row = d;
  row.active = activate;
  sqlite::Statement stmt(impl_->conn(), rows::insert_sql<rows::DecisionRow>().c_str());
  rows::bind<rows::DecisionRow>(stmt, row);
  stmt.run();
  const int64_t id = impl_->conn().last_insert_id();
  tx.commit();
  return id;
}

std::optional<Decision> Store::decision(int64_t id) const {
  if (!exists()) return std::nullopt;
  sqlite::Statement stmt(impl_->conn(), impl_->select<rows::DecisionRow>("WHERE id = :id").c_str());
  stmt.bind("id", id);
  if (!stmt.step()) return std::nullopt;
  Decision d;
  rows::read<rows::DecisionRow>(stmt, d);
  return d;
}

std::vector<Decision> Store::decisions(const DecisionFilter& filter) const {
  std::vector<Decision> out;
  if (!exists()) return out;
  sqlite::Statement stmt(impl_->conn(), impl_->select<rows::DecisionRow>(
      "WHERE (:instance_type = '' OR instance_type = :instance_type) "
      "AND (:model = '' OR model_name = :model OR model_signature = :model) AND (:active_only = 0 OR active = 1) "
      "ORDER BY instance_type, model_name, world_size, nnodes, precision, id").c_str());
  stmt.bind("instance_type", filter.instance_type.value_or(""))
      .bind("model", filter.model.value_or(""))
      .bind("active_only", int64_t{filter.active_only});
  while (stmt.step()) rows::read<rows::DecisionRow>(stmt, out.emplace_back());
  return out;
}

std::optional<Decision> Store::active_decision(const DecisionKey& key, bool any_precision) const {
  if (!exists()) return std::nullopt;
  sqlite::Statement stmt(impl_->conn(), impl_->select<rows::DecisionRow>(fmt::format(
      "WHERE active = 1 AND instance_type = :instance_type AND model_signature = :model_signature "
      "AND (:any_precision = 1 OR precision = :precision) AND world_size = :world_size AND nnodes = :nnodes "
      "AND {} = :gpus_shared ORDER BY id DESC LIMIT 1", impl_->gpus_shared_column())).c_str());
  rows::bind<rows::DecisionKeyRow>(stmt, key);
  stmt.bind("any_precision", int64_t{any_precision});
  if (!stmt.step()) return std::nullopt;
  Decision d;
  rows::read<rows::DecisionRow>(stmt, d);
  return d;
}

void Store::activate(int64_t id) {
  impl_->require_writable("activate a decision");
  sqlite::WriteTransaction tx(impl_->conn());
  sqlite::Statement find(impl_->conn(), impl_->select<rows::DecisionRow>("WHERE id = :id").c_str());
  find.bind("id", id);
  if (!find.step()) ACS_THROW(StoreError, "no decision {} in store {}", id, impl_->path);
  Decision d;
  rows::read<rows::DecisionRow>(find, d);
  impl_->deactivate(d.key);
  sqlite::Statement set(impl_->conn(), "UPDATE decisions SET active = 1 WHERE id = :id");
  set.bind("id", id).run();
  tx.commit();
}

void Store::remove_decision(int64_t id) {
  impl_->require_writable("delete a decision");
  sqlite::WriteTransaction tx(impl_->conn());
  sqlite::Statement stmt(impl_->conn(), "DELETE FROM decisions WHERE id = :id");
  stmt.bind("id", id).run();
  if (impl_->conn().changes() == 0) ACS_THROW(StoreError, "no decision {} in store {}", id, impl_->path);
  tx.commit();
}

std::string_view decision_kind(const Store& store, const Decision& decision) {
  const auto session = decision.session_id ? store.session(*decision.session_id) : std::nullopt;
  return session ? to_string(session->kind) : kImportedDecisionKind;
}

}  // namespace acspeed
