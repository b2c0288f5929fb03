#include "schema.h"

namespace acspeed {

const std::vector<Migration>& migrations() {
  static const std::vector<Migration> list = {
      {1, "instance types, tuning sessions, trials, decision history",
       R"sql(
CREATE TABLE instance_types(
  key TEXT PRIMARY KEY,
  explicit_name INTEGER NOT NULL,
  detected_key TEXT NOT NULL,
  details_json TEXT NOT NULL,
  first_seen TEXT NOT NULL,
  last_seen TEXT NOT NULL);
CREATE TABLE sessions(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  instance_type TEXT NOT NULL,
  model_name TEXT NOT NULL,
  model_signature TEXT NOT NULL,
  precision TEXT NOT NULL,
  world_size INTEGER NOT NULL,
  nnodes INTEGER NOT NULL,
  batch_size INTEGER NOT NULL,
  strategy TEXT NOT NULL,
  seed INTEGER NOT NULL,
  search_space_json TEXT NOT NULL,
  options_json TEXT NOT NULL,
  versions_json TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed', 'interrupted')),
  started_at TEXT NOT NULL,
  finished_at TEXT);
CREATE TABLE trials(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  ordinal INTEGER NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('search', 'baseline', 'candidate')),
  config_json TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'timeout')),
  error TEXT NOT NULL,
  step_times_json TEXT NOT NULL,
  metrics_json TEXT NOT NULL,
  started_at TEXT NOT NULL,
  finished_at TEXT NOT NULL);
CREATE INDEX trials_by_session ON trials(session_id, ordinal);
CREATE TABLE decisions(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  instance_type TEXT NOT NULL,
  model_signature TEXT NOT NULL,
  model_name TEXT NOT NULL,
  precision TEXT NOT NULL,
  world_size INTEGER NOT NULL,
  nnodes INTEGER NOT NULL,
  config_json TEXT NOT NULL,
  active INTEGER NOT NULL DEFAULT 0,
  session_id INTEGER REFERENCES sessions(id) ON DELETE SET NULL,
  torch_version TEXT NOT NULL,
  nccl_version TEXT NOT NULL,
  cuda_version TEXT NOT NULL,
  batch_size INTEGER NOT NULL,
  speedup REAL,
  ci_low REAL,
  ci_high REAL,
  evidence_json TEXT NOT NULL,
  note TEXT NOT NULL,
  created_at TEXT NOT NULL);
CREATE UNIQUE INDEX decisions_one_active
  ON decisions(instance_type, model_signature, precision, world_size, nnodes) WHERE active = 1;
CREATE INDEX decisions_by_key ON decisions(instance_type, model_signature, world_size, nnodes);
)sql"},
      // SQLite cannot change a CHECK constraint in place: the trials table is rebuilt.
      {2, "trial roles of the step model: compute (communication off) and calibration",
       R"sql(
CREATE TABLE trials_v2(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  ordinal INTEGER NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('search', 'baseline', 'candidate', 'compute', 'calibration')),
  config_json TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'timeout')),
  error TEXT NOT NULL,
  step_times_json TEXT NOT NULL,
  metrics_json TEXT NOT NULL,
  started_at TEXT NOT NULL,
  finished_at TEXT NOT NULL);
INSERT INTO trials_v2 SELECT * FROM trials;
DROP TABLE trials;
ALTER TABLE trials_v2 RENAME TO trials;
CREATE INDEX trials_by_session ON trials(session_id, ordinal);
)sql"},
      // Config schema 1 -> 2 (runtime/CONFIG.md): stored configs get the PowerSGD fields at their
      // defaults. Rows that are not valid JSON objects are left as they are (listed as unreadable).
      {3, "config schema 2 (PowerSGD fields) in stored decisions and trials",
       R"sql(
UPDATE decisions SET config_json = json_set(config_json, '$.version', 2, '$.powersgd_rank', 4,
                                            '$.powersgd_start_step', 10)
  WHERE CASE WHEN json_valid(config_json) AND json_type(config_json) = 'object'
             THEN json_extract(config_json, '$.version') = 1 ELSE 0 END;
UPDATE trials SET config_json = json_set(config_json, '$.version', 2, '$.powersgd_rank', 4,
                                         '$.powersgd_start_step', 10)
  WHERE CASE WHEN json_valid(config_json) AND json_type(config_json) = 'object'
             THEN json_extract(config_json, '$.version') = 1 ELSE 0 END;
)sql"},
      // A decision tuned with ranks sharing GPUs (ACSPEED_SHARE_GPUS) is keyed apart: every decision
      // stored before was tuned with a GPU per rank (or on CPUs).
      {4, "decisions keyed by whether the ranks shared GPUs",
       R"sql(
ALTER TABLE decisions ADD COLUMN gpus_shared INTEGER NOT NULL DEFAULT 0;
DROP INDEX decisions_one_active;
CREATE UNIQUE INDEX decisions_one_active
  ON decisions(instance_type, model_signature, precision, world_size, nnodes, gpus_shared) WHERE active = 1;
)sql"},
      // Sessions tuned inside a training job (issue 36) are stored beside acspeed-tune's: every session
      // stored before is offline.
      {5, "sessions' kind: offline (acspeed-tune) or online (inside the training job)",
       R"sql(
ALTER TABLE sessions ADD COLUMN kind TEXT NOT NULL DEFAULT 'offline' CHECK (kind IN ('offline', 'online'));
)sql"},
  };
  return list;
}

const std::vector<AddedColumn>& added_columns() {
  static const std::vector<AddedColumn> list = {
      {4, "decisions", "gpus_shared", "0"},    // tuned with a GPU per rank (or on CPUs)
      {5, "sessions", "kind", "'offline'"},   // tuned by acspeed-tune
  };
  return list;
}

std::map<std::string, std::string> absent_columns(const std::string& table, int version) {
  std::map<std::string, std::string> out;
  for (const auto& added : added_columns()) {
    if (added.table == table && version < added.version) out.emplace(added.column, added.before);
  }
  return out;
}

}  // namespace acspeed
