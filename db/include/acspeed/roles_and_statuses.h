// What a stored trial was run for (its role), how it ended, where a tuning session stands and what
// kind of session it is, with the one table of the spellings the store keeps and the reports, JSON
// and progress lines show.
// The store's CHECK lists (db/schema.sql) accept exactly these spellings.
#pragma once

#include <iterator>
#include <string_view>

namespace acspeed {

enum class TrialRole {
  kSearch,       // a point of the search space
  kBaseline,     // DDP's defaults, in a decision pair
  kCandidate,    // the search's best, in a decision pair
  kCompute,      // the step model's compute-only step: communication off (tuner/include/acspeed/tuner/step_model.h)
  kCalibration,  // DDP's defaults through acspeed's hook: the step model's calibration
};

enum class TrialStatus { kOk, kFailed, kTimeout };

enum class SessionStatus { kRunning, kDone, kFailed, kInterrupted };

enum class SessionKind {
  kOffline,  // `acspeed-tune tune`: trials in workers of its own
  kOnline,   // tuned inside the training job (issue 36)
};

template <class Value>
struct Spelling {
  Value value;
  std::string_view text;
};

// The spellings, one table per enum, in the enum's order.
inline constexpr Spelling<TrialRole> kTrialRoles[] = {
    {TrialRole::kSearch, "search"},   {TrialRole::kBaseline, "baseline"},
    {TrialRole::kCandidate, "candidate"}, {TrialRole::kCompute, "compute"},
    {TrialRole::kCalibration, "calibration"},
};
inline constexpr Spelling<TrialStatus> kTrialStatuses[] = {
    {TrialStatus::kOk, "ok"}, {TrialStatus::kFailed, "failed"}, {TrialStatus::kTimeout, "timeout"},
};
inline constexpr Spelling<SessionStatus> kSessionStatuses[] = {
    {SessionStatus::kRunning, "running"},
    {SessionStatus::kDone, "done"},
    {SessionStatus::kFailed, "failed"},
    {SessionStatus::kInterrupted, "interrupted"},
};
inline constexpr Spelling<SessionKind> kSessionKinds[] = {
    {SessionKind::kOffline, "offline"},
    {SessionKind::kOnline, "online"},
};
static_assert(std::size(kTrialRoles) == static_cast<size_t>(TrialRole::kCalibration) + 1);
static_assert(std::size(kTrialStatuses) == static_cast<size_t>(TrialStatus::kTimeout) + 1);
static_assert(std::size(kSessionStatuses) == static_cast<size_t>(SessionStatus::kInterrupted) + 1);
static_assert(std::size(kSessionKinds) == static_cast<size_t>(SessionKind::kOnline) + 1);

std::string_view to_string(TrialRole role);
std::string_view to_string(TrialStatus status);
std::string_view to_string(SessionStatus status);
std::string_view to_string(SessionKind kind);

// The value spelled `text`; an InvalidArgument naming it and the accepted spellings otherwise.
TrialRole parse_trial_role(std::string_view text);
TrialStatus parse_trial_status(std::string_view text);
SessionStatus parse_session_status(std::string_view text);
SessionKind parse_session_kind(std::string_view text);

}  // namespace acspeed
