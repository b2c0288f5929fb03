// The lookup `import acspeed` runs: fallback order, forced files, stale versions, pins, failures.
#include "acspeed/resolve.h"

#include <gtest/gtest.h>

#include <sqlite3.h>

#include <cstdlib>
#include <optional>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "acspeed/decision_io.h"
#include "acspeed/error.h"
#include "test_util.h"

namespace acspeed {
namespace {
using testing::sample_decision;
using testing::TempDir;

class Resolve : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"ACSPEED_DISABLE", "ACSPEED_CONFIG", "ACSPEED_STREAMS", "ACSPEED_DB", "NNODES",
                             "GROUP_WORLD_SIZE", "LOCAL_WORLD_SIZE", "ACSPEED_BUSY_TIMEOUT_MS"}) {
      unsetenv(name);
    }
    request.key = sample_decision("amp").key;
    request.torch_version = "2.15.1";
    request.store_path = dir.file("acspeed.db");
  }
  void TearDown() override { SetUp(); }
  void store(const Decision& d) { Store::open({request.store_path, false})->add_decision(d); }
  std::string write(const std::string& name, const std::string& text) {
    const auto path = dir.file(name);
    std::ofstream(path) << text;
    return path;
  }
  TempDir dir;
  ResolveRequest request;
};

TEST_F(Resolve, NoStoreMeansDefaultsAndSaysSo) {
  auto r = resolve_config(request);
  EXPECT_EQ(r.source, ResolveSource::kNoStore);
  EXPECT_FALSE(r.applied);
  EXPECT_TRUE(r.config.is_default());
  EXPECT_NE(r.message.find("acspeed-tune"), std::string::npos);
}

TEST_F(Resolve, ExactKeyWins) {
  store(sample_decision("fp32", 3));
  store(sample_decision("amp", 2));
  auto r = resolve_config(request);
  EXPECT_EQ(r.source, ResolveSource::kStored);
  EXPECT_TRUE(r.applied);
  EXPECT_EQ(r.config.streams, 2);
  EXPECT_NE(r.message.find("applied decision #2"), std::string::npos) << r.message;
  // The model as it was tuned, beside the signature the lookup matched.
  EXPECT_NE(r.message.find("model resnet18 (p2-00000000deadbeef), amp"), std::string::npos) << r.message;
}

TEST_F(Resolve, AStoredKeepDdpDefaultsDecisionIsNotAppliedAndSaysWhatItKeeps) {
  auto d = sample_decision();
  d.config = CommConfig{};
  store(d);
  auto r = resolve_config(request);
  EXPECT_EQ(r.source, ResolveSource::kStored);
  EXPECT_FALSE(r.applied);
  EXPECT_EQ(r.message, "decision #1 stored for cpu-2xTest, model resnet18 (p2-00000000deadbeef), amp, world size 2, "
                       "1 node keeps DDP defaults");
  setenv("ACSPEED_STREAMS", "2", 1);  // a pin over it changes something: applied, saying over what
  r = resolve_config(request);
  EXPECT_TRUE(r.applied);
  EXPECT_EQ(r.message.rfind("applied allreduce, 2 streams pinned by environment (streams); decision #1 stored for", 0), 0u)
      << r.message;
}

TEST_F(Resolve, SameKeyAnyPrecisionIsTheFallback) {
  store(sample_decision("fp32", 3));
  auto r = resolve_config(request);
  EXPECT_EQ(r.source, ResolveSource::kStoredOtherPrecision);
  EXPECT_EQ(r.config.streams, 3);
  EXPECT_NE(r.message.find("no decision for amp"), std::string::npos) << r.message;
}

TEST_F(Resolve, OtherInstanceTypeIsNotAppliedButNamed) {
  auto d = sample_decision();
  d.key.instance_type = "8xNVIDIA-H200-nvlink";
  store(d);
  auto r = resolve_config(request);
  EXPECT_EQ(r.source, ResolveSource::kNoEntry);
  EXPECT_TRUE(r.config.is_default());
  EXPECT_NE(r.message.find("8xNVIDIA-H200-nvlink"), std::string::npos) << r.message;
}

TEST_F(Resolve, DecisionFromAnotherTorchMinorIsNotApplied) {
  auto d = sample_decision();
  d.torch_version = "2.1.0";
  store(d);
  auto r = resolve_config(request);
  EXPECT_EQ(r.source, ResolveSource::kVersionMismatch);
  EXPECT_FALSE(r.applied);
  EXPECT_TRUE(r.config.is_default());
  EXPECT_NE(r.message.find("re-run acspeed-tune"), std::string::npos);
  request.torch_version = "2.1.2";  // same major.minor: applies
  EXPECT_EQ(resolve_config(request).source, ResolveSource::kStored);
}

TEST_F(Resolve, DisableWinsOverEverything) {
  store(sample_decision());
  setenv("ACSPEED_DISABLE", "1", 1);
  auto r = resolve_config(request);
  EXPECT_EQ(r.source, ResolveSource::kDisabled);
  EXPECT_FALSE(r.applied);
}

TEST_F(Resolve, ForcedConfigFileIsValidatedAndApplied) {
  setenv("ACSPEED_CONFIG", write("c.json", R"({"version":1,"algorithm":"reduce_scatter","extra":1})").c_str(), 1);
  auto r = resolve_config(request);
  EXPECT_EQ(r.source, ResolveSource::kForced);
  EXPECT_EQ(r.config.algorithm, Algorithm::kReduceScatter);
  ASSERT_EQ(r.warnings.size(), 1u);  // the unknown key
}

TEST_F(Resolve, ForcedDecisionFromAnotherInstanceTypeWarns) {
  auto d = sample_decision();
  d.key.instance_type = "ecs.gn7";
  setenv("ACSPEED_CONFIG", write("d.json", decisions_to_json({d})).c_str(), 1);
  auto r = resolve_config(request);
  EXPECT_EQ(r.source, ResolveSource::kForced);
  EXPECT_EQ(r.config.streams, 2);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("ecs.gn7"), std::string::npos);
}

TEST_F(Resolve, ADecisionTunedWithSharedGpusIsNeverAppliedToRanksWithAGpuEach) {
  auto shared = sample_decision("amp", 4);
  shared.key.gpus_shared = true;
  store(shared);
  auto own = resolve_config(request);  // this job's ranks each have their own GPU
  EXPECT_EQ(own.source, ResolveSource::kNoEntry);
  EXPECT_FALSE(own.applied);
  EXPECT_NE(own.message.find("decision #1 was tuned with ranks sharing GPUs: it applies only to jobs that share "
                             "GPUs"), std::string::npos) << own.message;
  request.key.gpus_shared = true;
  auto sharing = resolve_config(request);
  EXPECT_EQ(sharing.source, ResolveSource::kStored);
  EXPECT_EQ(sharing.config.streams, 4);
  EXPECT_NE(sharing.message.find("world size 2, 1 node, ranks sharing GPUs"), std::string::npos) << sharing.message;
}

TEST_F(Resolve, RanksSharingGpusGetNoDecisionTunedWithAGpuPerRank) {
  store(sample_decision("amp", 2));
  request.key.gpus_shared = true;
  auto r = resolve_config(request);
  EXPECT_EQ(r.source, ResolveSource::kNoEntry);
  EXPECT_NE(r.message.find("decision #1 was tuned with a GPU per rank: it does not apply to ranks sharing GPUs"),
            std::string::npos) << r.message;
}

TEST_F(Resolve, ForcedDecisionsDocumentPicksTheOneThatMatchesTheSharing) {
  auto own = sample_decision("amp", 2);
  auto shared = sample_decision("amp", 4);
  shared.key.gpus_shared = true;
  setenv("ACSPEED_CONFIG", write("d.json", decisions_to_json({own, shared})).c_str(), 1);
  EXPECT_EQ(resolve_config(request).config.streams, 2);
  request.key.gpus_shared = true;
  auto r = resolve_config(request);
  EXPECT_EQ(r.config.streams, 4);
  EXPECT_TRUE(r.warnings.empty());
  // One decision is forced whatever its sharing, with a warning.
  setenv("ACSPEED_CONFIG", write("one.json", decisions_to_json({own})).c_str(), 1);
  auto forced = resolve_config(request);
  EXPECT_EQ(forced.config.streams, 2);
  ASSERT_EQ(forced.warnings.size(), 1u);
  EXPECT_NE(forced.warnings[0].find("tuned with ranks on their own GPUs, this job's ranks share GPUs"),
            std::string::npos) << forced.warnings[0];
}

TEST_F(Resolve, BadForcedFileIsAnErrorWithDefaults) {
  setenv("ACSPEED_CONFIG", write("bad.json", R"({"version":1,"algorithm":"magic"})").c_str(), 1);
  auto r = resolve_config(request);
  EXPECT_EQ(r.source, ResolveSource::kError);
  EXPECT_TRUE(r.config.is_default());
  EXPECT_NE(r.message.find("magic"), std::string::npos) << r.message;
  setenv("ACSPEED_CONFIG", dir.file("absent.json").c_str(), 1);
  EXPECT_EQ(resolve_config(request).source, ResolveSource::kError);
}

TEST_F(Resolve, PinsApplyOverTheDecisionAndBadPinsAreErrors) {
  store(sample_decision());
  setenv("ACSPEED_STREAMS", "3", 1);
  auto r = resolve_config(request);
  EXPECT_EQ(r.config.streams, 3);
  EXPECT_EQ(r.pinned, std::vector<std::string>{"streams"});
  setenv("ACSPEED_STREAMS", "0", 1);
  EXPECT_EQ(resolve_config(request).source, ResolveSource::kError);
}

TEST_F(Resolve, CorruptStoreIsAnErrorNotACrash) {
  std::ofstream(request.store_path) << "garbage";
  auto r = resolve_config(request);
  EXPECT_EQ(r.source, ResolveSource::kError);
  EXPECT_NE(r.message.find(request.store_path), std::string::npos);
}

// Another program holds the store exclusively (a WAL reader waits for nothing else): the lookup
// waits ACSPEED_BUSY_TIMEOUT_MS, then gives DDP defaults with a message saying so.
TEST_F(Resolve, StoreLockedPastTheBusyTimeoutIsDefaultsSayingSo) {
  store(sample_decision());
  sqlite3* holder = nullptr;
  ASSERT_EQ(sqlite3_open(request.store_path.c_str(), &holder), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(holder, "PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE", nullptr, nullptr, nullptr),
            SQLITE_OK);
  setenv("ACSPEED_BUSY_TIMEOUT_MS", "50", 1);
  const auto r = resolve_config(request);
  unsetenv("ACSPEED_BUSY_TIMEOUT_MS");
  sqlite3_close(holder);
  EXPECT_EQ(r.source, ResolveSource::kError);
  EXPECT_TRUE(r.config.is_default());
  EXPECT_NE(r.message.find(fmt::format("store {} stayed locked by another process past the busy timeout (50 ms",
                                       request.store_path)),
            std::string::npos)
      << r.message;
  EXPECT_EQ(resolve_config(request).source, ResolveSource::kStored);  // released: found again
}

// The lookup promises never to throw: what nlohmann throws (a number too large for a double is not
// a parse_error) and a wrong-typed field of a decisions document are errors with DDP defaults too.
TEST_F(Resolve, NothingEscapesTheLookupNotEvenNlohmannErrors) {
  setenv("ACSPEED_CONFIG", write("huge.json", R"({"version":1,"bucket_cap_mb":1e999})").c_str(), 1);
  Resolution r;
  ASSERT_NO_THROW(r = resolve_config(request));
  EXPECT_EQ(r.source, ResolveSource::kError);
  EXPECT_TRUE(r.config.is_default());
  EXPECT_NE(r.message.find("not valid JSON"), std::string::npos) << r.message;
  auto doc = nlohmann::json::parse(decisions_to_json({sample_decision()}));
  doc["decisions"][0]["speedup"] = "fast";
  setenv("ACSPEED_CONFIG", write("typed.json", doc.dump()).c_str(), 1);
  ASSERT_NO_THROW(r = resolve_config(request));
  EXPECT_EQ(r.source, ResolveSource::kError);
  EXPECT_NE(r.message.find("decisions[0]: 'speedup' must be a number, got \"fast\""), std::string::npos) << r.message;
}

// A row another tool wrote: the decision is not applied, the message names it and how to remove it.
TEST_F(Resolve, GarbageConfigRowIsAnErrorNamingTheDecision) {
  store(sample_decision());
  for (const char* garbage : {"garbage", "[1,2]", R"({"version":1,"streams":"two"})", R"({"version":1e400})"}) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(request.store_path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "UPDATE decisions SET config_json = ?1", -1, &stmt, nullptr), SQLITE_OK);
    sqlite3_bind_text(stmt, 1, garbage, -1, SQLITE_TRANSIENT);
    ASSERT_EQ(sqlite3_step(stmt), SQLITE_DONE);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    Resolution r;
    ASSERT_NO_THROW(r = resolve_config(request)) << garbage;
    EXPECT_EQ(r.source, ResolveSource::kError) << garbage;
    EXPECT_TRUE(r.config.is_default());
    EXPECT_NE(r.message.find("decision #1"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("configs delete 1"), std::string::npos) << r.message;
  }
  // The row can still be listed and removed.
  auto writable = Store::open({request.store_path, false});
  const auto listed = writable->decisions();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_FALSE(listed[0].config_error.empty());
  EXPECT_THROW(decisions_to_json(listed), StoreError);  // never exported as if it were DDP's defaults
  writable->remove_decision(listed[0].id);
  EXPECT_TRUE(writable->decisions().empty());
}

TEST_F(Resolve, DecisionWithoutATorchVersionIsNotApplied) {
  auto d = sample_decision();
  d.torch_version = "";
  store(d);
  auto r = resolve_config(request);
  EXPECT_EQ(r.source, ResolveSource::kVersionMismatch);
  EXPECT_TRUE(r.config.is_default());
  EXPECT_NE(r.message.find("no recorded torch version"), std::string::npos) << r.message;
  request.torch_version = "";  // a job that cannot say: nothing to compare
  EXPECT_EQ(resolve_config(request).source, ResolveSource::kStored);
}

TEST_F(Resolve, NodeCountFromTheEnvironmentAndABadNnodesIsAnError) {
  auto two_nodes = sample_decision();
  two_nodes.key.nnodes = 2;
  store(two_nodes);
  request.key.nnodes = 0;  // as `import acspeed` asks: count them here
  setenv("NNODES", "2", 1);
  EXPECT_EQ(resolve_config(request).source, ResolveSource::kStored);
  unsetenv("NNODES");
  setenv("GROUP_WORLD_SIZE", "2", 1);
  EXPECT_EQ(resolve_config(request).source, ResolveSource::kStored);
  unsetenv("GROUP_WORLD_SIZE");
  setenv("LOCAL_WORLD_SIZE", "2", 1);  // world size 2 on one node
  EXPECT_EQ(resolve_config(request).source, ResolveSource::kNoEntry);
  setenv("NNODES", "two", 1);
  const auto r = resolve_config(request);
  EXPECT_EQ(r.source, ResolveSource::kError);
  EXPECT_NE(r.message.find("NNODES='two'"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace acspeed

namespace acspeed {
namespace {

// The instance knobs `import acspeed` sets before any communicator (NCCL's sockets), looked up by
// instance type and node count alone: the model is not known yet.
class InstanceKnobsLookup : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"ACSPEED_DISABLE", "ACSPEED_CONFIG", "ACSPEED_NCCL_SOCKETS", "NNODES", "GROUP_WORLD_SIZE",
                             "LOCAL_WORLD_SIZE"}) {
      unsetenv(name);
    }
    request.instance_type = "cpu-2xTest";
    request.nnodes = 1;
    request.torch_version = "2.15.1";
    request.store_path = dir.file("acspeed.db");
  }
  void TearDown() override { SetUp(); }
  // An active decision of its own model (each model signature is a key of its own).
  int64_t store(int model, std::optional<NcclSockets> sockets, int64_t nnodes = 1) {
    Decision d = testing::sample_decision("amp");
    d.key.model_signature = fmt::format("p2-{:016x}", model);
    d.key.nnodes = nnodes;
    d.config.nccl_sockets = sockets;
    return Store::open({request.store_path, false})->add_decision(d, true);
  }
  testing::TempDir dir;
  InstanceKnobsRequest request;
};

TEST_F(InstanceKnobsLookup, NoStoreOrNoDecisionSetsNothingAndSaysNothing) {
  auto k = resolve_instance_knobs(request);
  EXPECT_FALSE(k.nccl_sockets);
  EXPECT_TRUE(k.environment.empty());
  EXPECT_EQ(k.message, "");
  store(1, std::nullopt);  // a decision that leaves NCCL's choice
  k = resolve_instance_knobs(request);
  EXPECT_FALSE(k.nccl_sockets);
  EXPECT_TRUE(k.environment.empty());
  EXPECT_EQ(k.message, "");
}

TEST_F(InstanceKnobsLookup, OneDecisionSetsItsSocketsForItsInstanceTypeAndNodeCountOnly) {
  const int64_t id = store(1, NcclSockets{2, 4});
  auto k = resolve_instance_knobs(request);
  EXPECT_EQ(k.source, ResolveSource::kStored);
  EXPECT_EQ(to_string(k.nccl_sockets), "2x4");
  EXPECT_EQ(k.environment, (std::vector<std::pair<std::string, std::string>>{{"NCCL_SOCKET_NTHREADS", "2"},
                                                                           {"NCCL_NSOCKS_PERTHREAD", "4"}}));
  EXPECT_EQ(k.decision_ids, std::vector<int64_t>{id});
  EXPECT_EQ(k.message, fmt::format("NCCL sockets 2x4 from decision #{} for cpu-2xTest with 1 node(s)", id));
  request.nnodes = 2;  // another node count: not this decision's
  EXPECT_TRUE(resolve_instance_knobs(request).environment.empty());
  request.nnodes = 1;
  request.instance_type = "other-box";
  EXPECT_TRUE(resolve_instance_knobs(request).environment.empty());
  request.instance_type = "cpu-2xTest";
  request.torch_version = "2.11.0";  // tuned under another torch: not applied
  EXPECT_TRUE(resolve_instance_knobs(request).environment.empty());
  request.torch_version = "2.15.1";
  setenv("ACSPEED_DISABLE", "1", 1);
  EXPECT_TRUE(resolve_instance_knobs(request).environment.empty());
  unsetenv("ACSPEED_DISABLE");
  setenv("ACSPEED_NCCL_SOCKETS", "0", 1);  // pinned to NCCL's choice: the store is not read
  k = resolve_instance_knobs(request);
  EXPECT_EQ(k.source, ResolveSource::kPinned);
  EXPECT_TRUE(k.environment.empty());
  setenv("ACSPEED_NCCL_SOCKETS", "17x1", 1);  // a bad pin: an error naming it, nothing set, never a throw
  k = resolve_instance_knobs(request);
  EXPECT_EQ(k.source, ResolveSource::kError);
  EXPECT_NE(k.message.find("ACSPEED_NCCL_SOCKETS '17x1' is out of range"), std::string::npos) << k.message;
  EXPECT_TRUE(k.environment.empty());
}

TEST_F(InstanceKnobsLookup, DecisionsThatAgreeSetTheirValueAndTwoThatDisagreeSetNothingAndSayWhich) {
  const int64_t first = store(1, NcclSockets{2, 4});
  const int64_t second = store(2, NcclSockets{2, 4});
  auto k = resolve_instance_knobs(request);
  EXPECT_EQ(to_string(k.nccl_sockets), "2x4");
  EXPECT_EQ(k.decision_ids.size(), 2u);
  EXPECT_NE(k.message.find(fmt::format("from decisions #{}, #{}", first, second)), std::string::npos) << k.message;
  const int64_t third = store(3, NcclSockets{4, 4});
  k = resolve_instance_knobs(request);
  EXPECT_EQ(k.source, ResolveSource::kDisagree);
  EXPECT_FALSE(k.nccl_sockets);
  EXPECT_TRUE(k.environment.empty());
  EXPECT_NE(k.message.find(fmt::format("the decisions for cpu-2xTest with 1 node(s) disagree (2x4 #{}, #{}; 4x4 #{})",
                                       first, second, third)),
            std::string::npos)
      << k.message;
}

}  // namespace
}  // namespace acspeed
