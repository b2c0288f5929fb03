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
#include "acspeed/json_io.h"
#include "acspeed/log.h"
#include "acspeed/settings.h"
#include "schema.h"
#include "sqlite.h"

namespace acspeed {
namespace fs = std::filesystem;

namespace {

constexpr const char* kNow = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";

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
  const auto probe = existing_ancestor(path);
  struct statfs info {};
  if (statfs(probe.c_str(), &info) != 0) return;
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

std::string json_times(const std::vector<double>& times) { return nlohmann::json(times).dump(); }
std::vector<double> parse_times(const std::string& text, int64_t trial_id, const std::string& path) {
  try {
    return json_io::as<std::vector<double>>(json_io::parse(text, "step times"), "step_times_json");
  } catch (const InvalidArgument& e) {
    ACS_THROW(StoreError, "trial {} in store {} holds unreadable step times: {}", trial_id, path, e.what());
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
    sqlite::Statement stmt(*db, "PRAGMA user_version");
    stmt.step();
    return static_cast<int>(stmt.int64(0));
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

  Decision read_decision(const sqlite::Statement& s) const;

  // The decisions' gpus_shared column (schema 4). A store of an older schema read without migrating
  // (a training job's lookup never migrates) has none: all its decisions were tuned with a GPU per rank.
  const char* gpus_shared_column() const { return version >= 4 ? "gpus_shared" : "0"; }
  // What read_decision() reads, in its order.
  std::string decision_columns() const;

  // Clears the active flag of the key's active decision (inside the caller's transaction).
  void deactivate(const DecisionKey& key) const {
    sqlite::Statement clear(*db,
                            "UPDATE decisions SET active = 0 WHERE instance_type = ?1 AND model_signature = ?2 "
                            "AND precision = ?3 AND world_size = ?4 AND nnodes = ?5 AND gpus_shared = ?6 "
                            "AND active = 1");
    clear.bind(1, key.instance_type).bind(2, key.model_signature).bind(3, key.precision)
        .bind(4, key.world_size).bind(5, key.nnodes).bind(6, int64_t{key.gpus_shared}).run();
  }
};

namespace {
constexpr const char* kDecisionColumns =
    "id, instance_type, model_signature, model_name, precision, world_size, nnodes, config_json, "
    "active, session_id, torch_version, nccl_version, cuda_version, batch_size, speedup, ci_low, "
    "ci_high, evidence_json, note, created_at";
}

std::string Store::Impl::decision_columns() const {
  return fmt::format("{}, {}", kDecisionColumns, gpus_shared_column());
}

Decision Store::Impl::read_decision(const sqlite::Statement& s) const {
  Decision d;
  d.id = s.int64(0);
  d.key.instance_type = s.text(1);
  d.key.model_signature = s.text(2);
  d.model_name = s.text(3);
  d.key.precision = s.text(4);
  d.key.world_size = s.int64(5);
  d.key.nnodes = s.int64(6);
  try {
    d.config = config_from_json(s.text(7));
  } catch (const InvalidArgument& e) {
    d.config_error = e.what();
  }
  d.active = s.int64(8) != 0;
  if (!s.is_null(9)) d.session_id = s.int64(9);
  d.torch_version = s.text(10);
  d.nccl_version = s.text(11);
  d.cuda_version = s.text(12);
  d.batch_size = s.int64(13);
  if (!s.is_null(14)) d.speedup = s.real(14);
  if (!s.is_null(15)) d.ci_low = s.real(15);
  if (!s.is_null(16)) d.ci_high = s.real(16);
  d.evidence_json = s.text(17);
  d.note = s.text(18);
  d.created_at = s.text(19);
  d.key.gpus_shared = s.int64(20) != 0;
  return d;
}

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
                             "SELECT (SELECT user_version FROM pragma_user_version), count(*) FROM sqlite_master");
    tables.step();
    impl->version = static_cast<int>(tables.int64(0));
    if (impl->version == 0 && tables.int64(1) != 0) {
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
      "INSERT INTO instance_types(key, explicit_name, detected_key, details_json, first_seen, last_seen) "
      "VALUES (?1, ?2, ?3, ?4, {0}, {0}) ON CONFLICT(key) DO UPDATE SET explicit_name = ?2, "
      "detected_key = ?3, details_json = ?4, last_seen = {0}", kNow).c_str());
  stmt.bind(1, fp.instance_type)
      .bind(2, int64_t{fp.explicit_name})
      .bind(3, fp.detected_key)
      .bind(4, nlohmann::json(fp.details).dump())
      .run();
  tx.commit();
}

std::vector<InstanceTypeRecord> Store::instance_types() const {
  std::vector<InstanceTypeRecord> out;
  if (!exists()) return out;
  sqlite::Statement stmt(impl_->conn(),
                         "SELECT key, explicit_name, detected_key, details_json, first_seen, last_seen "
                         "FROM instance_types ORDER BY key");
  while (stmt.step()) {
    out.push_back({stmt.text(0), stmt.int64(1) != 0, stmt.text(2), stmt.text(3), stmt.text(4), stmt.text(5)});
  }
  return out;
}

int64_t Store::create_session(const SessionRecord& s) {
  impl_->require_writable("create a tuning session");
  sqlite::WriteTransaction tx(impl_->conn());
  sqlite::Statement stmt(impl_->conn(), fmt::format(
      "INSERT INTO sessions(instance_type, model_name, model_signature, precision, world_size, nnodes, "
      "batch_size, strategy, seed, search_space_json, options_json, versions_json, status, started_at) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, {})", kNow).c_str());
  stmt.bind(1, s.instance_type).bind(2, s.model_name).bind(3, s.model_signature).bind(4, s.precision)
      .bind(5, s.world_size).bind(6, s.nnodes).bind(7, s.batch_size).bind(8, s.strategy).bind(9, s.seed)
      .bind(10, s.search_space_json).bind(11, s.options_json).bind(12, s.versions_json).bind(13, s.status)
      .run();
  const int64_t id = impl_->conn().last_insert_id();
  tx.commit();
  return id;
}

void Store::finish_session(int64_t session_id, const std::string& status) {
  impl_->require_writable("finish a tuning session");
  sqlite::WriteTransaction tx(impl_->conn());
  sqlite::Statement stmt(impl_->conn(),
                         fmt::format("UPDATE sessions SET status = ?1, finished_at = {} WHERE id = ?2", kNow).c_str());
  stmt.bind(1, status).bind(2, session_id).run();
  if (impl_->conn().changes() == 0) ACS_THROW(StoreError, "no tuning session {} in store {}", session_id, impl_->path);
  tx.commit();
}

namespace {
constexpr const char* kSessionColumns =
    "id, instance_type, model_name, model_signature, precision, world_size, nnodes, batch_size, strategy, "
    "seed, search_space_json, options_json, versions_json, status, started_at, coalesce(finished_at, '')";

SessionRecord read_session(const sqlite::Statement& s) {
  SessionRecord r;
  r.id = s.int64(0);
  r.instance_type = s.text(1);
  r.model_name = s.text(2);
  r.model_signature = s.text(3);
  r.precision = s.text(4);
  r.world_size = s.int64(5);
  r.nnodes = s.int64(6);
  r.batch_size = s.int64(7);
  r.strategy = s.text(8);
  r.seed = s.int64(9);
  r.search_space_json = s.text(10);
  r.options_json = s.text(11);
  r.versions_json = s.text(12);
  r.status = s.text(13);
  r.started_at = s.text(14);
  r.finished_at = s.text(15);
  return r;
}
}  // namespace

std::optional<SessionRecord> Store::session(int64_t session_id) const {
  if (!exists()) return std::nullopt;
  sqlite::Statement stmt(impl_->conn(), fmt::format("SELECT {} FROM sessions WHERE id = ?1", kSessionColumns).c_str());
  stmt.bind(1, session_id);
  if (!stmt.step()) return std::nullopt;
  return read_session(stmt);
}

std::vector<SessionRecord> Store::sessions() const {
  std::vector<SessionRecord> out;
  if (!exists()) return out;
  sqlite::Statement stmt(impl_->conn(), fmt::format("SELECT {} FROM sessions ORDER BY id", kSessionColumns).c_str());
  while (stmt.step()) out.push_back(read_session(stmt));
  return out;
}

int64_t Store::add_trial(const TrialRecord& t) {
  impl_->require_writable("record a trial");
  sqlite::WriteTransaction tx(impl_->conn());
  sqlite::Statement stmt(impl_->conn(), fmt::format(
      "INSERT INTO trials(session_id, ordinal, role, config_json, status, error, step_times_json, "
      "metrics_json, started_at, finished_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
      "coalesce(nullif(?9, ''), {0}), coalesce(nullif(?10, ''), {0}))", kNow).c_str());
  stmt.bind(1, t.session_id).bind(2, t.ordinal).bind(3, t.role).bind(4, t.config_json).bind(5, t.status)
      .bind(6, t.error).bind(7, json_times(t.step_times_s)).bind(8, t.metrics_json).bind(9, t.started_at)
      .bind(10, t.finished_at).run();
  const int64_t id = impl_->conn().last_insert_id();
  tx.commit();
  return id;
}

std::vector<TrialRecord> Store::trials(int64_t session_id) const {
  std::vector<TrialRecord> out;
  if (!exists()) return out;
  sqlite::Statement stmt(impl_->conn(),
                         "SELECT id, session_id, ordinal, role, config_json, status, error, step_times_json, "
                         "metrics_json, started_at, finished_at FROM trials WHERE session_id = ?1 "
                         "ORDER BY ordinal, id");
  stmt.bind(1, session_id);
  while (stmt.step()) {
    TrialRecord t;
    t.id = stmt.int64(0);
    t.session_id = stmt.int64(1);
    t.ordinal = stmt.int64(2);
    t.role = stmt.text(3);
    t.config_json = stmt.text(4);
    t.status = stmt.text(5);
    t.error = stmt.text(6);
    t.step_times_s = parse_times(stmt.text(7), t.id, impl_->path);
    t.metrics_json = stmt.text(8);
    t.started_at = stmt.text(9);
    t.finished_at = stmt.text(10);
    out.push_back(std::move(t));
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
  sqlite::Statement stmt(impl_->conn(), fmt::format(
      "INSERT INTO decisions(instance_type, model_signature, model_name, precision, world_size, nnodes, "
      "config_json, active, session_id, torch_version, nccl_version, cuda_version, batch_size, speedup, "
      "ci_low, ci_high, evidence_json, note, gpus_shared, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
      "?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, {})", kNow).c_str());
  stmt.bind(1, d.key.instance_type).bind(2, d.key.model_signature).bind(3, d.model_name)
      .bind(4, d.key.precision).bind(5, d.key.world_size).bind(6, d.key.nnodes)
      .bind(7, config_to_json(d.config)).bind(8, int64_t{activate}).bind(9, d.session_id)
      .bind(10, d.torch_version).bind(11, d.nccl_version).bind(12, d.cuda_version).bind(13, d.batch_size)
      .bind(14, d.speedup).bind(15, d.ci_low).bind(16, d.ci_high).bind(17, d.evidence_json).bind(18, d.note)
      .bind(19, int64_t{d.key.gpus_shared}).run();
  const int64_t id = impl_->conn().last_insert_id();
  tx.commit();
  return id;
}

std::optional<Decision> Store::decision(int64_t id) const {
  if (!exists()) return std::nullopt;
  sqlite::Statement stmt(impl_->conn(),
                         fmt::format("SELECT {} FROM decisions WHERE id = ?1", impl_->decision_columns()).c_str());
  stmt.bind(1, id);
  if (!stmt.step()) return std::nullopt;
  return impl_->read_decision(stmt);
}

std::vector<Decision> Store::decisions(const DecisionFilter& filter) const {
  std::vector<Decision> out;
  if (!exists()) return out;
  sqlite::Statement stmt(impl_->conn(), fmt::format(
      "SELECT {} FROM decisions WHERE (?1 = '' OR instance_type = ?1) "
      "AND (?2 = '' OR model_name = ?2 OR model_signature = ?2) AND (?3 = 0 OR active = 1) "
      "ORDER BY instance_type, model_name, world_size, nnodes, precision, id", impl_->decision_columns()).c_str());
  stmt.bind(1, filter.instance_type.value_or(""))
      .bind(2, filter.model.value_or(""))
      .bind(3, int64_t{filter.active_only});
  while (stmt.step()) out.push_back(impl_->read_decision(stmt));
  return out;
}

std::optional<Decision> Store::active_decision(const DecisionKey& key, bool any_precision) const {
  if (!exists()) return std::nullopt;
  sqlite::Statement stmt(impl_->conn(), fmt::format(
      "SELECT {} FROM decisions WHERE active = 1 AND instance_type = ?1 AND model_signature = ?2 "
      "AND (?3 = 1 OR precision = ?4) AND world_size = ?5 AND nnodes = ?6 AND {} = ?7 ORDER BY id DESC LIMIT 1",
      impl_->decision_columns(), impl_->gpus_shared_column()).c_str());
  stmt.bind(1, key.instance_type).bind(2, key.model_signature).bind(3, int64_t{any_precision})
      .bind(4, key.precision).bind(5, key.world_size).bind(6, key.nnodes).bind(7, int64_t{key.gpus_shared});
  if (!stmt.step()) return std::nullopt;
  return impl_->read_decision(stmt);
}

void Store::activate(int64_t id) {
  impl_->require_writable("activate a decision");
  sqlite::WriteTransaction tx(impl_->conn());
  sqlite::Statement find(impl_->conn(),
                         fmt::format("SELECT {} FROM decisions WHERE id = ?1", impl_->decision_columns()).c_str());
  find.bind(1, id);
  if (!find.step()) ACS_THROW(StoreError, "no decision {} in store {}", id, impl_->path);
  const Decision d = impl_->read_decision(find);
  impl_->deactivate(d.key);
  sqlite::Statement set(impl_->conn(), "UPDATE decisions SET active = 1 WHERE id = ?1");
  set.bind(1, id).run();
  tx.commit();
}

void Store::remove_decision(int64_t id) {
  impl_->require_writable("delete a decision");
  sqlite::WriteTransaction tx(impl_->conn());
  sqlite::Statement stmt(impl_->conn(), "DELETE FROM decisions WHERE id = ?1");
  stmt.bind(1, id).run();
  if (impl_->conn().changes() == 0) ACS_THROW(StoreError, "no decision {} in store {}", id, impl_->path);
  tx.commit();
}

}  // namespace acspeed
