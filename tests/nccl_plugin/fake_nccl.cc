#include "fake_nccl.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace acspeed::testing {
namespace {
std::mutex g_log_mu;
std::vector<LogRecord> g_log;
constexpr float X = ACS_NCCL_ALGO_PROTO_IGNORE;
}  // namespace

bool CostTable::operator==(const CostTable& other) const {
  return std::memcmp(cells, other.cells, sizeof cells) == 0;
}

CostTable typical_allreduce_table() {
  return CostTable{{
      /* tree           */ {40.0f, 30.0f, 25.0f},
      /* ring           */ {50.0f, 22.0f, 20.0f},
      /* collnet_direct */ {X, X, X},
      /* collnet_chain  */ {X, X, X},
      /* nvls           */ {X, X, 18.0f},
      /* nvls_tree      */ {X, X, X},
      /* pat            */ {X, X, X},
  }};
}

std::pair<int, int> nccl_pick(const CostTable& table) {
  float best = 3600000000.0f;
  std::pair<int, int> pick{-1, -1};
  for (int a = 0; a < ACS_NCCL_NUM_ALGORITHMS; ++a) {
    for (int p = 0; p < ACS_NCCL_NUM_PROTOCOLS; ++p) {
      const float cost = table.cells[a][p];
      if (cost == ACS_NCCL_ALGO_PROTO_IGNORE) continue;
      if (cost >= 0.0f && cost < best) {
        best = cost;
        pick = {a, p};
      }
    }
  }
  return pick;
}

void fake_nccl_logger(acs_nccl_log_level_t level, unsigned long flags, const char* /*file*/,
                      int /*line*/, const char* format, ...) {
  char text[4096];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_log.push_back({level, flags, text});
}

std::vector<LogRecord> logged() {
  std::lock_guard<std::mutex> lock(g_log_mu);
  return g_log;
}

void clear_log() {
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_log.clear();
}

size_t count_logged(acs_nccl_log_level_t level, const std::string& text) {
  size_t n = 0;
  for (const auto& record : logged()) {
    if (record.level == level && record.text.find(text) != std::string::npos) ++n;
  }
  return n;
}

}  // namespace acspeed::testing
