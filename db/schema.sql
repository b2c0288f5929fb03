-- The acspeed store's current schema: what a store holds after every migration in db/src/schema.cc
-- (new stores are made by running those migrations in order, never from this file). The fields these
-- columns map to are in db/src/rows.h, and what they mean in db/include/acspeed/store.h.
-- tests/db/schema_test.cc migrates a new store and compares its sqlite_master with this file: a new
-- migration updates this file in the same commit.

-- One row per machine kind tuned on (the fingerprint's key, or the name the user gave it).
CREATE TABLE instance_types(
  key TEXT PRIMARY KEY,
  explicit_name INTEGER NOT NULL,
  detected_key TEXT NOT NULL,
  details_json TEXT NOT NULL,
  first_seen TEXT NOT NULL,
  last_seen TEXT NOT NULL);

-- One row per `acspeed-tune tune` run.
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

-- Every trial of a session with its raw step times. Quoted because migration 2 rebuilt the table
-- under another name and renamed it (SQLite cannot change a CHECK constraint in place).
CREATE TABLE "trials"(
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
CREATE INDEX trials_by_session ON trials(session_id, ordinal);

-- The decisions, kept as history: at most one active decision per key.
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
  created_at TEXT NOT NULL,
  gpus_shared INTEGER NOT NULL DEFAULT 0);
CREATE UNIQUE INDEX decisions_one_active
  ON decisions(instance_type, model_signature, precision, world_size, nnodes, gpus_shared) WHERE active = 1;
CREATE INDEX decisions_by_key ON decisions(instance_type, model_signature, world_size, nnodes);

PRAGMA user_version = 4;
