#include "acspeed/roles_and_statuses.h"

#include <string>

#include "acspeed/error.h"

namespace acspeed {
namespace {

template <class Value, size_t N>
std::string_view spelling(const Spelling<Value> (&table)[N], Value value) {
  return table[static_cast<size_t>(value)].text;
}

template <class Value, size_t N>
Value parse(const Spelling<Value> (&table)[N], std::string_view text, const char* what) {
  std::string accepted;
  for (const auto& entry : table) {
    if (entry.text == text) return entry.value;
    accepted += (accepted.empty() ? "" : ", ") + std::string(entry.text);
  }
  ACS_THROW(InvalidArgument, "unknown {} '{}' (accepted: {})", what, text, accepted);
}

// spelling() indexes each table by the enum's value.
template <class Value, size_t N>
constexpr bool in_enum_order(const Spelling<Value> (&table)[N]) {
  for (size_t i = 0; i < N; ++i) {
    if (static_cast<size_t>(table[i].value) != i) return false;
  }
  return true;
}
static_assert(in_enum_order(kTrialRoles) && in_enum_order(kTrialStatuses) && in_enum_order(kSessionStatuses) &&
              in_enum_order(kSessionKinds));

}  // namespace

std::string_view to_string(TrialRole role) { return spelling(kTrialRoles, role); }
std::string_view to_string(TrialStatus status) { return spelling(kTrialStatuses, status); }
std::string_view to_string(SessionStatus status) { return spelling(kSessionStatuses, status); }
std::string_view to_string(SessionKind kind) { return spelling(kSessionKinds, kind); }

TrialRole parse_trial_role(std::string_view text) { return parse(kTrialRoles, text, "trial role"); }
TrialStatus parse_trial_status(std::string_view text) { return parse(kTrialStatuses, text, "trial status"); }
SessionStatus parse_session_status(std::string_view text) { return parse(kSessionStatuses, text, "session status"); }
SessionKind parse_session_kind(std::string_view text) { return parse(kSessionKinds, text, "session kind"); }

}  // namespace acspeed
