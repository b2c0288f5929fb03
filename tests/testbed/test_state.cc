#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "acspeed/error.h"
#include "acspeed/testbed/layout.h"
#include "acspeed/testbed/state.h"

namespace acspeed::testbed {
namespace {

namespace fs = std::filesystem;

class TestbedState : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/acspeed-testbed-state-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  static ClusterState sample(const std::string& name) {
    ClusterState s;
    s.name = name;
    s.profile = "2x1@1gbit";
    s.netns = make_layout(name, 2).all_netns();
    s.master_port = 29500;
    s.owner_pid = getpid();
    s.owner_start_ticks = process_start_ticks(getpid()).value();
    s.created_unix = 1700000000;
    return s;
  }

  std::string dir_;
};

TEST_F(TestbedState, RoundTripsThroughJson) {
  const ClusterState s = sample("rt");
  const ClusterState back = state_from_json(state_text(s), "test");
  EXPECT_EQ(back.name, s.name);
  EXPECT_EQ(back.profile, s.profile);
  EXPECT_EQ(back.netns, s.netns);
  EXPECT_EQ(back.master_port, s.master_port);
  EXPECT_EQ(back.owner_pid, s.owner_pid);
  EXPECT_EQ(back.owner_start_ticks, s.owner_start_ticks);
  EXPECT_EQ(back.created_unix, s.created_unix);
}

TEST_F(TestbedState, RejectsOtherVersionsAndForeignNamespaces) {
  std::string text = state_text(sample("v"));
  const auto at = text.find("\"version\": 1");
  ASSERT_NE(at, std::string::npos) << text;
  std::string v2 = text;
  v2.replace(at, 12, "\"version\": 2");
  EXPECT_THROW(state_from_json(v2, "f"), Error);
  // A tampered file must never make `down` delete someone else's namespace.
  ClusterState foreign = sample("v");
  foreign.netns.push_back("cni-1234");
  try {
    state_from_json(state_text(foreign), "f.json");
    ADD_FAILURE() << "accepted a foreign namespace";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cni-1234"), std::string::npos) << e.what();
  }
  EXPECT_THROW(state_from_json("{not json", "f"), Error);
}

TEST_F(TestbedState, CreationIsExclusiveSoTwoRunsNeverShareAName) {
  EXPECT_TRUE(create_state(dir_, sample("dup")));
  EXPECT_FALSE(create_state(dir_, sample("dup")));
  EXPECT_TRUE(create_state(dir_, sample("other")));
  const auto all = read_all_states(dir_);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "dup");
  EXPECT_EQ(all[1].name, "other");
  remove_state(dir_, "dup");
  EXPECT_FALSE(read_state(dir_, "dup").has_value());
  EXPECT_NO_THROW(remove_state(dir_, "dup"));  // idempotent
}

TEST_F(TestbedState, UnreadableFilesAreSkippedNotFatal) {
  ASSERT_TRUE(create_state(dir_, sample("good")));
  std::ofstream(dir_ + "/broken.json") << "{";
  const auto all = read_all_states(dir_);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].name, "good");
}

TEST_F(TestbedState, ClusterOfADeadOwnerIsStale) {
  ClusterState live = sample("live");
  EXPECT_TRUE(owner_alive(live));
  EXPECT_FALSE(is_stale(live));

  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ClusterState dead = sample("dead");
  dead.owner_pid = child;
  dead.owner_start_ticks = process_start_ticks(child).value_or(1);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_FALSE(owner_alive(dead));
  EXPECT_TRUE(is_stale(dead));

  ClusterState reused = sample("reused");  // same pid, other start time: a reused pid
  reused.owner_start_ticks += 1;
  EXPECT_TRUE(is_stale(reused));

  ClusterState from_up = sample("up");  // made by `up`: no owner, never stale
  from_up.owner_pid = 0;
  EXPECT_FALSE(is_stale(from_up));
}

}  // namespace
}  // namespace acspeed::testbed
