// Every rank of a job opens the store at the same moment while a tuner may be writing: readers
// never see an error, and two writers never lose a write. Real processes, not threads.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <vector>

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

}  // namespace
}  // namespace acspeed
