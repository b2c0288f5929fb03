// The config store: SQLite (WAL, busy timeout, every write in a transaction) holding instance types,
// tuning sessions, every trial with its raw step times, and decisions kept as history with at most
// one active decision per key. Schema version in PRAGMA user_version; ordered migrations in
// db/src/schema.cc, the current schema in db/schema.sql, each table's columns mapped to these
// records' fields in db/src/rows.h.
//
// Opening never changes a file it cannot use: a corrupt or foreign file, a schema newer than this
// build, a read-only file or folder (opened read-only, immutable when WAL files cannot be created),
// or a network file system (refused: SQLite WAL needs local locking) each give a StoreError naming
// the file, before anything is written.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "acspeed/config.h"
#include "acspeed/fingerprint.h"
#include "acspeed/roles_and_statuses.h"

namespace acspeed {

inline constexpr int kStoreSchemaVersion = 5;

// $ACSPEED_DB, else $XDG_DATA_HOME/acspeed/acspeed.db, else ~/.local/share/acspeed/acspeed.db.
std::string default_store_path();

struct StoreOptions {
  std::string path;             // empty = default_store_path()
  bool read_only = false;       // lookups: never create or migrate anything
  // How long an access waits for a lock another process holds (a writer for another writer; a
  // reader only for a store held exclusively); empty = ACSPEED_BUSY_TIMEOUT_MS (default 15000).
  std::optional<int> busy_timeout_ms;
};

// What decisions are keyed by.
struct DecisionKey {
  std::string instance_type;
  std::string model_signature;
  std::string precision;  // amp|fp32|fp16|bf16
  int64_t world_size = 0;
  int64_t nnodes = 1;
  // The ranks shared GPUs (runtime's gpus_shared(): ACSPEED_SHARE_GPUS and more ranks per node than
  // GPUs). Such a decision applies only to jobs that share GPUs too, and no other decision to them.
  bool gpus_shared = false;
};

struct Decision {
  int64_t id = 0;
  DecisionKey key;
  std::string model_name;        // for humans: "resnet50"
  CommConfig config;
  // Non-empty when the stored config JSON is not a valid config (written by another tool, damaged):
  // why. `config` is then DDP's defaults, the decision is never applied, and it can still be listed,
  // shown and deleted.
  std::string config_error;
  bool active = false;
  std::optional<int64_t> session_id;
  std::string torch_version;
  std::string nccl_version;
  std::string cuda_version;
  int64_t batch_size = 0;        // per device
  std::optional<double> speedup;  // median speedup over DDP defaults
  std::optional<double> ci_low;   // 95% interval of the speedup
  std::optional<double> ci_high;
  std::string evidence_json = "{}";  // raw paired step times etc.
  std::string note;
  std::string created_at;  // UTC ISO-8601, set by the store
};

struct SessionRecord {
  int64_t id = 0;
  std::string instance_type;
  std::string model_name;
  std::string model_signature;
  std::string precision;
  int64_t world_size = 0;
  int64_t nnodes = 1;
  int64_t batch_size = 0;
  std::string strategy;
  int64_t seed = 0;
  std::string search_space_json = "{}";
  std::string options_json = "{}";   // the command line and settings the session ran with
  std::string versions_json = "{}";  // torch / NCCL / CUDA / acspeed versions, fingerprint details
  SessionStatus status = SessionStatus::kRunning;
  SessionKind kind = SessionKind::kOffline;  // schema 5; a session stored before is offline
  std::string started_at;
  std::string finished_at;
};

struct TrialRecord {
  int64_t id = 0;
  int64_t session_id = 0;
  int64_t ordinal = 0;               // order within the session
  TrialRole role = TrialRole::kSearch;
  std::string config_json;           // CommConfig JSON
  TrialStatus status = TrialStatus::kOk;
  std::string error;                 // error text for failed/timeout
  std::vector<double> step_times_s;  // raw per-step times (max over ranks), seconds
  std::string metrics_json = "{}";   // probe breakdown, loss, etc.
  std::string started_at;
  std::string finished_at;
};

struct InstanceTypeRecord {
  std::string key;
  bool explicit_name = false;
  std::string detected_key;
  std::string details_json;
  std::string first_seen;
  std::string last_seen;
};

struct DecisionFilter {
  std::optional<std::string> instance_type;
  std::optional<std::string> model;  // matches model_name or model_signature
  bool active_only = false;
};

class Store {
 public:
  // Throws StoreError (naming the file) when the store cannot be used as asked.
  static std::unique_ptr<Store> open(const StoreOptions& options);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& path() const;
  bool read_only() const;
  // Why the store is read-only ("" when writable): a read-only file/folder, or a newer schema.
  const std::string& read_only_reason() const;
  int schema_version() const;
  bool exists() const;  // false when opened read-only on a path with no store yet

  void record_instance_type(const Fingerprint& fingerprint);
  std::vector<InstanceTypeRecord> instance_types() const;

  int64_t create_session(const SessionRecord& session);
  void finish_session(int64_t session_id, SessionStatus status);
  std::optional<SessionRecord> session(int64_t session_id) const;
  std::vector<SessionRecord> sessions() const;

  int64_t add_trial(const TrialRecord& trial);
  std::vector<TrialRecord> trials(int64_t session_id) const;

  // Adds a decision; with activate, it becomes the active one for its key (older ones stay).
  int64_t add_decision(const Decision& decision, bool activate = true);
  std::optional<Decision> decision(int64_t id) const;
  std::vector<Decision> decisions(const DecisionFilter& filter = {}) const;
  // The active decision for exactly this key; with any_precision, for the key with any precision
  // (most recent first).
  std::optional<Decision> active_decision(const DecisionKey& key, bool any_precision = false) const;
  // Makes decision `id` the active one for its key. Throws StoreError for an unknown id.
  void activate(int64_t id);
  // Deletes decision `id`; throws StoreError for an unknown id.
  void remove_decision(int64_t id);

 private:
  struct Impl;
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Where a decision came from, as `configs list`, `explain` and the reports name it: the kind of the
// session that made it ("offline": `acspeed-tune`; "online": inside a training job), or "imported"
// when it has no session in this store (`configs import` carries no session).
std::string_view decision_kind(const Store& store, const Decision& decision);
inline constexpr std::string_view kImportedDecisionKind = "imported";

// True for file systems on which SQLite WAL locking is unreliable (NFS, SMB/CIFS, FUSE, Lustre,
// GPFS, Ceph, AFS, 9P...). `fs_type` is statfs().f_type.
bool is_network_filesystem(int64_t fs_type);

}  // namespace acspeed
