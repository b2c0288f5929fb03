// Trial roles, trial statuses, session statuses and kinds: one spelling each, kept by the store as spelled.
#include "acspeed/roles_and_statuses.h"

#include <sqlite3.h>

#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>

#include "acspeed/error.h"
#include "acspeed/store.h"
#include "test_util.h"

namespace acspeed {
namespace {
using testing::stored_text;
using testing::TempDir;

template <class Value, size_t N, class Parse>
void expect_round_trip(const Spelling<Value> (&table)[N], Parse parse) {
  std::set<std::string_view> seen;
  for (const auto& entry : table) {
    EXPECT_EQ(to_string(entry.value), entry.text);
    EXPECT_EQ(parse(entry.text), entry.value) << entry.text;
    EXPECT_TRUE(seen.insert(entry.text).second) << "two values are spelled " << entry.text;
  }
}

TEST(RolesAndStatuses, EveryValueRoundTripsThroughItsSpelling) {
  expect_round_trip(kTrialRoles, parse_trial_role);
  expect_round_trip(kTrialStatuses, parse_trial_status);
  expect_round_trip(kSessionStatuses, parse_session_status);
  expect_round_trip(kSessionKinds, parse_session_kind);
  EXPECT_EQ(to_string(TrialRole::kCalibration), "calibration");
  EXPECT_EQ(to_string(TrialStatus::kTimeout), "timeout");
  EXPECT_EQ(to_string(SessionStatus::kInterrupted), "interrupted");
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RolesAndStatuses, AnUnknownSpellingIsAnErrorNamingItAndTheAcceptedOnes) {
  EXPECT_EQ(error_of([] { parse_trial_role("warmup"); }),
            "unknown trial role 'warmup' (accepted: search, baseline, candidate, compute, calibration)");
  EXPECT_EQ(error_of([] { parse_trial_status("OK"); }), "unknown trial status 'OK' (accepted: ok, failed, timeout)");
  EXPECT_EQ(error_of([] { parse_session_status(""); }),
            "unknown session status '' (accepted: running, done, failed, interrupted)");
  EXPECT_EQ(error_of([] { parse_session_kind("batch"); }), "unknown session kind 'batch' (accepted: offline, online)");
}

SessionRecord sample_session() {
  SessionRecord session;
  session.instance_type = "cpu-2xTest";
  session.model_name = "resnet18";
  session.model_signature = "p2-1";
  session.precision = "fp32";
  session.world_size = 2;
  session.strategy = "grid";
  return session;
}

TEST(RolesAndStatuses, TheStoreKeepsEveryRoleAndStatusAsSpelled) {
  TempDir dir;
  const auto path = dir.file("s.db");
  auto store = Store::open({path, false});
  for (const auto& status : kSessionStatuses) {
    const int64_t sid = store->create_session(sample_session());
    int64_t ordinal = 0;
    for (const auto& role : kTrialRoles) {
      for (const auto& trial_status : kTrialStatuses) {
        TrialRecord trial;
        trial.session_id = sid;
        trial.ordinal = ordinal++;
        trial.role = role.value;
        trial.status = trial_status.value;
        trial.config_json = "{}";
        const int64_t id = store->add_trial(trial);
        EXPECT_EQ(stored_text(path, fmt::format("SELECT role || ' ' || status FROM trials WHERE id = {}", id)),
                  fmt::format("{} {}", role.text, trial_status.text));
      }
    }
    const auto trials = store->trials(sid);
    ASSERT_EQ(trials.size(), std::size(kTrialRoles) * std::size(kTrialStatuses));
    for (const auto& t : trials) {
      EXPECT_EQ(t.role, kTrialRoles[t.ordinal / std::size(kTrialStatuses)].value);
      EXPECT_EQ(t.status, kTrialStatuses[t.ordinal % std::size(kTrialStatuses)].value);
    }
    EXPECT_EQ(store->session(sid)->status, SessionStatus::kRunning);
    store->finish_session(sid, status.value);
    EXPECT_EQ(store->session(sid)->status, status.value);
    EXPECT_EQ(stored_text(path, fmt::format("SELECT status FROM sessions WHERE id = {}", sid)), status.text);
  }
  for (const auto& kind : kSessionKinds) {
    SessionRecord session = sample_session();
    session.kind = kind.value;
    const int64_t sid = store->create_session(session);
    EXPECT_EQ(store->session(sid)->kind, kind.value);
    EXPECT_EQ(stored_text(path, fmt::format("SELECT kind FROM sessions WHERE id = {}", sid)), kind.text);
  }
}

// A store another build wrote (its CHECK lists aside) with a spelling this build does not know.
TEST(RolesAndStatuses, AStoredSpellingThisBuildDoesNotKnowIsAnErrorNamingIt) {
  TempDir dir;
  const auto path = dir.file("s.db");
  int64_t sid = 0;
  {
    auto store = Store::open({path, false});
    sid = store->create_session(sample_session());
    TrialRecord trial;
    trial.session_id = sid;
    trial.config_json = "{}";
    store->add_trial(trial);
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "PRAGMA ignore_check_constraints = 1; UPDATE trials SET role = 'warmup'; "
                         "UPDATE sessions SET status = 'paused';",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto store = Store::open({path, true});
  const auto trials_error = error_of([&] { store->trials(sid); });
  EXPECT_NE(trials_error.find("trial 1 in store " + path), std::string::npos) << trials_error;
  EXPECT_NE(trials_error.find("unknown trial role 'warmup'"), std::string::npos) << trials_error;
  const auto session_error = error_of([&] { store->session(sid); });
  EXPECT_NE(session_error.find("session 1 in store " + path), std::string::npos) << session_error;
  EXPECT_NE(session_error.find("unknown session status 'paused'"), std::string::npos) << session_error;
  EXPECT_THROW(store->sessions(), StoreError);
}

}  // namespace
}  // namespace acspeed
