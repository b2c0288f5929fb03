// Every rank of a job opens the store at the same moment while a tuner may be writing: readers
// never see an error, and two writers never lose a write. Real processes, not threads.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "acspeed/resolve.h"
#include "acspeed/store.h"
#include "test_util.h"

namespace acspeed {
namespace {
using testing::sample_decision;
using testing::TempDir;

TEST(ConfigStore, ConcurrentReadersSeeCommittedDecisionsAndWritersLoseNothing) {
  TempDir dir;
  const auto path = dir.file("acspeed.db");
  constexpr int kReaders = 6;
  constexpr int kWriters = 2;
  constexpr int kWritesEach = 40;
  std::vector<pid_t> children;
  // Writers start on a store that does not exist yet: creation and migration race too.
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = fork();
    if (pid == 0) {
      int rc = 0;
      try {
        for (int i = 0; i < kWritesEach; ++i) {
          auto store = Store::open({path, false});
          auto d = sample_decision(w == 0 ? "amp" : "fp32", 1 + i % 8);
          store->add_decision(d);
        }
      } catch (const std::exception& e) {
        fprintf(stderr, "writer %d: %s\n", w, e.what());
        rc = 1;
      }
      _exit(rc);
    }
    children.push_back(pid);
  }
  for (int r = 0; r < kReaders; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      int rc = 0;
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      try {
        while (std::chrono::steady_clock::now() < until) {
          auto store = Store::open({path, true});
          auto d = store->active_decision(sample_decision("amp").key);
          if (d && (d->config.streams < 1 || d->config.streams > 8)) rc = 2;  // a torn read
        }
      } catch (const std::exception& e) {
        fprintf(stderr, "reader %d: %s\n", r, e.what());
        rc = 1;
      }
      _exit(rc);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << pid << " status " << status;
  }
  auto store = Store::open({path, true});
  EXPECT_EQ(store->decisions().size(), static_cast<size_t>(kWriters * kWritesEach));
  // One active decision per key, whatever the interleaving.
  EXPECT_EQ(store->decisions({std::nullopt, std::nullopt, true}).size(), 2u);
}

// Decision i of the writer below: its fields all derive from i, so a lookup that mixed two
// decisions (or read half of one) is caught.
Decision numbered_decision(int i) {
  Decision d = sample_decision("amp", 1 + i % 8);
  d.config.bucket_cap_mb = 1 + i;
  d.note = fmt::format("decision {}", i);
  std::vector<double> steps(4000, 0.001 * i);  // ~30 KiB of evidence: the row spans overflow pages
  d.evidence_json = fmt::format("{{\"i\": {}, \"steps\": [{}]}}", i, fmt::join(steps, ","));
  return d;
}

// What a tuner writes for one decision: a session, its trials with raw step times, the decision.
void write_like_a_tuner(Store& store, int i) {
  SessionRecord session;
  session.instance_type = "cpu-2xTest";
  session.model_name = "resnet18";
  session.model_signature = sample_decision().key.model_signature;
  session.precision = "amp";
  session.world_size = 2;
  session.batch_size = 32;
  session.strategy = "grid";
  const int64_t id = store.create_session(session);
  for (int t = 0; t < 2; ++t) {
    TrialRecord trial;
    trial.session_id = id;
    trial.ordinal = t;
    trial.config_json = R"({"version": 2})";
    trial.step_times_s.assign(200, 0.1 + t);
    store.add_trial(trial);
  }
  Decision d = numbered_decision(i);
  d.session_id = id;
  store.add_decision(d);
  store.finish_session(id, SessionStatus::kDone);
}

// 64 processes each run the lookup `import acspeed` runs (resolve_config: open the store read-only,
// find the active decision) over and over, while a writer stores one decision after another as a
// tuner does. No lookup fails, each sees a whole decision, and no
// process ever sees an older decision after a newer one. About 2 s of CPU.
TEST(ConfigStore, SixtyFourLookupsWhileATunerWritesNeverFailNorSeeATornDecision) {
  for (const char* name : {"ACSPEED_DISABLE", "ACSPEED_CONFIG", "ACSPEED_BUCKET_MB", "ACSPEED_STREAMS",
                           "ACSPEED_ALGORITHM", "ACSPEED_COMPRESSION", "ACSPEED_POWERSGD_RANK", "NNODES"}) {
    unsetenv(name);
  }
  TempDir dir;
  ResolveRequest request;
  request.key = sample_decision("amp").key;
  request.torch_version = sample_decision().torch_version;
  request.store_path = dir.file("acspeed.db");
  constexpr int kLookups = 64;
  constexpr int kDecisions = 12;
  const std::string go = dir.file("go");
  const std::string done = dir.file("done");
  {
    auto store = Store::open({request.store_path, false});
    write_like_a_tuner(*store, 0);
  }
  std::vector<pid_t> readers;
  for (int r = 0; r < kLookups; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      while (!std::filesystem::exists(go)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      int last = -1;
      int count = 0;
      bool finished = false;
      while (!finished || count < 3) {
        finished = std::filesystem::exists(done);  // one more lookup after the last write
        const Resolution res = resolve_config(request);
        ++count;
        if (res.source != ResolveSource::kStored || !res.decision || !res.warnings.empty()) {
          fprintf(stderr, "lookup %d: %s: %s\n", r, std::string(to_string(res.source)).c_str(), res.message.c_str());
          _exit(1);
        }
        const int i = static_cast<int>(*res.config.bucket_cap_mb) - 1;
        const Decision want = numbered_decision(i);
        if (!(res.config == want.config) || res.decision->note != want.note ||
            res.decision->evidence_json != want.evidence_json) {
          fprintf(stderr, "lookup %d: a torn decision: %s / %s\n", r, res.config.describe().c_str(),
                  res.decision->note.c_str());
          _exit(2);
        }
        if (i < last) {
          fprintf(stderr, "lookup %d: decision %d after decision %d\n", r, i, last);
          _exit(3);
        }
        last = i;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a job looks up once per DDP model
      }
      _exit(last == kDecisions - 1 ? 0 : 4);
    }
    readers.push_back(pid);
  }
  { std::ofstream touch(go); }
  {
    auto store = Store::open({request.store_path, false});
    for (int i = 1; i < kDecisions; ++i) write_like_a_tuner(*store, i);
  }
  { std::ofstream touch(done); }
  for (pid_t pid : readers) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "lookup process " << pid << " status " << status;
  }
  auto store = Store::open({request.store_path, true});
  EXPECT_EQ(store->decisions().size(), static_cast<size_t>(kDecisions));
  EXPECT_EQ(store->active_decision(request.key)->note, numbered_decision(kDecisions - 1).note);
}

}  // namespace
}  // namespace acspeed
