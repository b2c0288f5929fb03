#include "acspeed/store.h"

#include <functional>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include <cstdlib>

#include "../../db/src/schema.h"
#include "acspeed/decision_io.h"
#include "acspeed/error.h"
#include "test_util.h"

namespace acspeed {
namespace {
using testing::sample_decision;
using testing::stored_text;
using testing::TempDir;

std::unique_ptr<Store> open_rw(const std::string& path) { return Store::open({path, false}); }

TEST(ConfigStore, NewStoreIsWalAtCurrentSchemaWithParentsCreated) {
  TempDir dir;
  const auto path = dir.file("a/b/acspeed.db");
  auto store = open_rw(path);
  EXPECT_EQ(store->schema_version(), kStoreSchemaVersion);
  EXPECT_FALSE(store->read_only());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &stmt, nullptr);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "wal");
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST(ConfigStore, MigrationsAreOrderedAndReopeningIsANoOp) {
  int expected = 1;
  for (const auto& m : migrations()) EXPECT_EQ(m.to_version, expected++);
  EXPECT_EQ(migrations().back().to_version, kStoreSchemaVersion);
  TempDir dir;
  const auto path = dir.file("s.db");
  { open_rw(path)->add_decision(sample_decision()); }
  auto again = open_rw(path);
  EXPECT_EQ(again->schema_version(), kStoreSchemaVersion);
  EXPECT_EQ(again->decisions().size(), 1u);
}

TEST(ConfigStore, MigratesAnEmptyVersionZeroDatabase) {
  TempDir dir;
  const auto path = dir.file("old.db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "PRAGMA user_version = 0", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  auto store = open_rw(path);
  EXPECT_EQ(store->schema_version(), kStoreSchemaVersion);
  EXPECT_TRUE(store->decisions().empty());
}

TEST(ConfigStore, SchemaOneStoreHasItsConfigsMigratedToConfigVersionTwo) {
  TempDir dir;
  const auto path = dir.file("v1.db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, migrations()[0].sql, nullptr, nullptr, nullptr), SQLITE_OK);
  const char* rows = R"sql(
INSERT INTO decisions(instance_type, model_signature, model_name, precision, world_size, nnodes, config_json, active,
  torch_version, nccl_version, cuda_version, batch_size, evidence_json, note, created_at)
VALUES ('cpu-x', 'p1', 'm', 'fp32', 2, 1, '{"version":1,"streams":2}', 1, '2.15.0', '', '', 8, '{}', '', 't'),
       ('cpu-x', 'p2', 'm', 'fp32', 2, 1, 'garbage', 0, '2.15.0', '', '', 8, '{}', '', 't');
PRAGMA user_version = 1;)sql";
  ASSERT_EQ(sqlite3_exec(db, rows, nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  {
    auto store = open_rw(path);
    EXPECT_EQ(store->schema_version(), kStoreSchemaVersion);
  }
  const auto migrated = nlohmann::json::parse(stored_text(path, "SELECT config_json FROM decisions WHERE model_signature='p1'"));
  EXPECT_EQ(migrated["version"], 2);
  EXPECT_EQ(migrated["streams"], 2);
  EXPECT_EQ(migrated["powersgd_rank"], kDefaultPowerSgdRank);
  EXPECT_EQ(migrated["powersgd_start_step"], kDefaultPowerSgdStartStep);
  EXPECT_EQ(stored_text(path, "SELECT config_json FROM decisions WHERE model_signature='p2'"), "garbage");
}

TEST(ConfigStore, SchemaThreeStoreKeepsItsDecisionsAsTunedWithAGpuPerRank) {
  TempDir dir;
  const auto path = dir.file("v3.db");
  {  // A store as acspeed wrote it before the shared-GPU key: schema 3, one active decision.
    StoreOptions options{path, false};
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    for (const auto& m : migrations()) {
      if (m.to_version > 3) break;
      ASSERT_EQ(sqlite3_exec(db, m.sql, nullptr, nullptr, nullptr), SQLITE_OK) << m.description;
    }
    const char* rows = R"sql(
INSERT INTO decisions(instance_type, model_signature, model_name, precision, world_size, nnodes, config_json, active,
  torch_version, nccl_version, cuda_version, batch_size, evidence_json, note, created_at)
VALUES ('1xNVIDIA-H200-pcie', 'p1', 'm', 'amp', 2, 1, '{"version":2,"streams":2}', 1, '2.11.0', '2.28.9', '13.0', 8,
        '{}', '', 't');
PRAGMA user_version = 3;)sql";
    ASSERT_EQ(sqlite3_exec(db, rows, nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  DecisionKey key{"1xNVIDIA-H200-pcie", "p1", "amp", 2, 1};
  {  // A training job's lookup reads it without migrating it.
    auto reader = Store::open({path, true});
    EXPECT_EQ(reader->schema_version(), 3);
    const auto found = reader->active_decision(key);
    ASSERT_TRUE(found);
    EXPECT_FALSE(found->key.gpus_shared);
    EXPECT_EQ(reader->decisions().size(), 1u);
    DecisionKey shared = key;
    shared.gpus_shared = true;
    EXPECT_FALSE(reader->active_decision(shared, /*any_precision=*/true));
  }
  auto store = open_rw(path);
  EXPECT_EQ(store->schema_version(), kStoreSchemaVersion);
  const auto found = store->active_decision(key);
  ASSERT_TRUE(found);
  EXPECT_FALSE(found->key.gpus_shared);
  EXPECT_EQ(found->config.streams, 2);
  key.gpus_shared = true;
  EXPECT_FALSE(store->active_decision(key));
  EXPECT_FALSE(store->active_decision(key, /*any_precision=*/true));
}

TEST(ConfigStore, SchemaFourStoreHasItsSessionsReadAsOffline) {
  TempDir dir;
  const auto path = dir.file("v4.db");
  {  // A store as acspeed wrote it before sessions had a kind: schema 4, one session.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    for (const auto& m : migrations()) {
      if (m.to_version > 4) break;
      ASSERT_EQ(sqlite3_exec(db, m.sql, nullptr, nullptr, nullptr), SQLITE_OK) << m.description;
    }
    const char* rows = R"sql(
INSERT INTO sessions(instance_type, model_name, model_signature, precision, world_size, nnodes, batch_size, strategy,
  seed, search_space_json, options_json, versions_json, status, started_at)
VALUES ('cpu-x', 'resnet18', 'p1', 'fp32', 2, 1, 8, 'grid', 3, '{}', '{}', '{}', 'interrupted', 't');
PRAGMA user_version = 4;)sql";
    ASSERT_EQ(sqlite3_exec(db, rows, nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  {  // Read as it is (read-only commands never migrate).
    auto reader = Store::open({path, true});
    EXPECT_EQ(reader->schema_version(), 4);
    ASSERT_EQ(reader->sessions().size(), 1u);
    EXPECT_EQ(reader->sessions()[0].kind, SessionKind::kOffline);
    EXPECT_EQ(reader->session(1)->status, SessionStatus::kInterrupted);
  }
  auto store = open_rw(path);
  EXPECT_EQ(store->schema_version(), kStoreSchemaVersion);
  EXPECT_EQ(store->session(1)->kind, SessionKind::kOffline);
  EXPECT_EQ(stored_text(path, "SELECT kind FROM sessions WHERE id = 1"), "offline");
}

TEST(ConfigStore, ADecisionTunedWithSharedGpusServesOnlyJobsThatShareThem) {
  TempDir dir;
  auto store = open_rw(dir.file("s.db"));
  const auto own = store->add_decision(sample_decision("amp", 2));
  auto shared = sample_decision("amp", 4);
  shared.key.gpus_shared = true;
  const auto shared_id = store->add_decision(shared);
  // Both stay active: their keys differ in gpus_shared alone.
  EXPECT_TRUE(store->decision(own)->active);
  EXPECT_TRUE(store->decision(shared_id)->active);
  EXPECT_TRUE(store->decision(shared_id)->key.gpus_shared);
  auto key = sample_decision().key;
  EXPECT_EQ(store->active_decision(key)->id, own);
  key.gpus_shared = true;
  EXPECT_EQ(store->active_decision(key)->id, shared_id);
  EXPECT_EQ(store->active_decision(key, /*any_precision=*/true)->id, shared_id);
  // A new shared decision replaces the shared one only.
  const auto newer = store->add_decision(shared);
  EXPECT_FALSE(store->decision(shared_id)->active);
  EXPECT_TRUE(store->decision(own)->active);
  store->activate(shared_id);
  EXPECT_FALSE(store->decision(newer)->active);
  EXPECT_TRUE(store->decision(own)->active);
}

TEST(ConfigStore, NewDecisionBecomesActiveAndHistoryIsKept) {
  TempDir dir;
  auto store = open_rw(dir.file("s.db"));
  const auto first = store->add_decision(sample_decision("amp", 2));
  const auto second = store->add_decision(sample_decision("amp", 4));
  auto active = store->active_decision(sample_decision().key);
  ASSERT_TRUE(active);
  EXPECT_EQ(active->id, second);
  EXPECT_EQ(active->config.streams, 4);
  EXPECT_EQ(store->decisions().size(), 2u);
  EXPECT_FALSE(store->decision(first)->active);

  store->activate(first);
  EXPECT_EQ(store->active_decision(sample_decision().key)->id, first);
  EXPECT_FALSE(store->decision(second)->active);

  store->remove_decision(first);
  EXPECT_FALSE(store->active_decision(sample_decision().key));
  EXPECT_TRUE(store->decision(second));
  EXPECT_THROW(store->remove_decision(first), StoreError);
  EXPECT_THROW(store->activate(12345), StoreError);
}

TEST(ConfigStore, AnyPrecisionLookupFindsOtherPrecision) {
  TempDir dir;
  auto store = open_rw(dir.file("s.db"));
  store->add_decision(sample_decision("fp32"));
  auto key = sample_decision("amp").key;
  EXPECT_FALSE(store->active_decision(key));
  auto other = store->active_decision(key, /*any_precision=*/true);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->key.precision, "fp32");
  key.world_size = 4;
  EXPECT_FALSE(store->active_decision(key, true));
}

TEST(ConfigStore, SessionsAndTrialsKeepRawStepTimes) {
  TempDir dir;
  auto store = open_rw(dir.file("s.db"));
  SessionRecord session;
  session.instance_type = "cpu-2xTest";
  session.model_name = "resnet18";
  session.model_signature = "p2-1";
  session.precision = "fp32";
  session.world_size = 2;
  session.strategy = "grid";
  session.seed = 7;
  const auto sid = store->create_session(session);
  TrialRecord trial;
  trial.session_id = sid;
  trial.ordinal = 1;
  trial.config_json = config_to_json(CommConfig{});
  trial.step_times_s = {0.5, 0.25, 0.125};
  store->add_trial(trial);
  trial.ordinal = 2;
  trial.status = TrialStatus::kFailed;
  trial.error = "worker exited with code 1";
  trial.step_times_s.clear();
  store->add_trial(trial);
  store->finish_session(sid, SessionStatus::kDone);

  auto trials = store->trials(sid);
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].step_times_s, (std::vector<double>{0.5, 0.25, 0.125}));
  EXPECT_EQ(trials[1].status, TrialStatus::kFailed);
  EXPECT_EQ(trials[1].error, "worker exited with code 1");
  auto back = store->session(sid);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->status, SessionStatus::kDone);
  EXPECT_EQ(back->seed, 7);
  EXPECT_FALSE(back->finished_at.empty());
}

TEST(ConfigStore, ADecisionsKindIsItsSessionsOrImportedWithoutOne) {
  TempDir dir;
  auto store = open_rw(dir.file("s.db"));
  SessionRecord session;  // what the session holds besides its kind does not matter here
  Decision offline = sample_decision();
  offline.session_id = store->create_session(session);
  session.kind = SessionKind::kOnline;
  Decision online = sample_decision();
  online.session_id = store->create_session(session);
  EXPECT_EQ(decision_kind(*store, offline), "offline");
  EXPECT_EQ(decision_kind(*store, online), "online");
  EXPECT_EQ(decision_kind(*store, sample_decision()), "imported");  // no session
  Decision gone = sample_decision();
  gone.session_id = 999;  // a session this store does not hold
  EXPECT_EQ(decision_kind(*store, gone), "imported");
}

TEST(ConfigStore, InstanceTypesRecordTheirDetails) {
  TempDir dir;
  auto store = open_rw(dir.file("s.db"));
  Fingerprint fp;
  fp.instance_type = "2x1@1gbit";
  fp.detected_key = "cpu-2xTest";
  fp.explicit_name = true;
  fp.details = {{"torch", "2.15.0"}};
  store->record_instance_type(fp);
  store->record_instance_type(fp);
  auto types = store->instance_types();
  ASSERT_EQ(types.size(), 1u);
  EXPECT_EQ(types[0].key, "2x1@1gbit");
  EXPECT_TRUE(types[0].explicit_name);
  EXPECT_NE(types[0].details_json.find("2.15.0"), std::string::npos);
}

TEST(ConfigStore, DecisionsDocumentRoundTrips) {
  auto d = sample_decision();
  d.evidence_json = R"({"pairs":[[1.0,0.8]]})";
  const auto text = decisions_to_json({d});
  EXPECT_TRUE(is_decisions_document(text));
  auto back = decisions_from_json(text);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].config, d.config);
  EXPECT_EQ(back[0].key.model_signature, d.key.model_signature);
  EXPECT_EQ(*back[0].ci_low, 1.2);
  EXPECT_NE(back[0].evidence_json.find("pairs"), std::string::npos);
  EXPECT_FALSE(back[0].key.gpus_shared);
  d.key.gpus_shared = true;
  EXPECT_TRUE(decisions_from_json(decisions_to_json({d}))[0].key.gpus_shared);
  // A document from before the key had gpus_shared: a decision tuned with a GPU per rank.
  auto old = nlohmann::json::parse(decisions_to_json({d}));
  old["decisions"][0].erase("gpus_shared");
  EXPECT_FALSE(decisions_from_json(old.dump())[0].key.gpus_shared);
  EXPECT_THROW(decisions_from_json(R"({"format":"acspeed-decisions","version":9,"decisions":[]})"), InvalidArgument);
  EXPECT_THROW(decisions_from_json(R"({"format":"acspeed-decisions","version":1,"decisions":[{"config":{}}]})"),
               InvalidArgument);
}

TEST(ConfigStore, ImportedDecisionsNeedTheirTorchVersionAndRightTypes) {
  auto doc = nlohmann::json::parse(decisions_to_json({sample_decision()}));
  auto refused = [&](const std::function<void(nlohmann::json&)>& change, const std::string& expected) {
    auto copy = doc;
    change(copy["decisions"][0]);
    try {
      decisions_from_json(copy.dump());
      ADD_FAILURE() << "accepted: " << copy.dump();
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  refused([](auto& d) { d.erase("torch_version"); }, "decisions[0]: 'torch_version' is missing");
  refused([](auto& d) { d["torch_version"] = ""; }, "'torch_version' is empty");
  refused([](auto& d) { d["model_name"] = 5; }, "'model_name' must be a string, got 5");
  refused([](auto& d) { d["ci_low"] = "low"; }, "'ci_low' must be a number");
  refused([](auto& d) { d["precision"] = "fp8"; }, "'precision' 'fp8' is not one of amp, fp32, fp16, bf16");
  refused([](auto& d) { d["nnodes"] = 3; }, "'nnodes' 3 must be between 1 and the world size 2");
  refused([](auto& d) { d["config"]["streams"] = 0; }, "config: streams 0 is out of range");
  EXPECT_EQ(decisions_from_json(doc.dump()).size(), 1u);
}

TEST(ConfigStore, DefaultPathFollowsAcspeedDbThenXdgThenHome) {
  const std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  setenv("ACSPEED_DB", "/tmp/x/custom.db", 1);
  EXPECT_EQ(default_store_path(), "/tmp/x/custom.db");
  unsetenv("ACSPEED_DB");
  setenv("XDG_DATA_HOME", "/tmp/xdg", 1);
  EXPECT_EQ(default_store_path(), "/tmp/xdg/acspeed/acspeed.db");
  unsetenv("XDG_DATA_HOME");
  setenv("HOME", "/tmp/home", 1);
  EXPECT_EQ(default_store_path(), "/tmp/home/.local/share/acspeed/acspeed.db");
  setenv("HOME", home.c_str(), 1);
}

}  // namespace
}  // namespace acspeed
