// The NCCL side of the tuner ABI, re-stated for tests: a cost table shaped like NCCL 2.28's, the
// choice NCCL makes from it, and a logger that records what the plugin logs.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "nccl_tuner_common.h"

namespace acspeed::testing {

struct CostTable {
  float cells[ACS_NCCL_NUM_ALGORITHMS][ACS_NCCL_NUM_PROTOCOLS];

  // How NCCL passes it to getCollInfo.
  float** as_nccl_argument() { return reinterpret_cast<float**>(cells); }
  bool operator==(const CostTable& other) const;  // byte-identical
};

// An allreduce cost table as NCCL fills it on one NVSwitch node: CollNet, NVLS-tree and PAT ruled
// out (-1), NVLS only with Simple. NCCL alone picks NVLS/Simple.
CostTable typical_allreduce_table();

// NCCL's pick from a table (topoGetAlgoInfo): the first cheapest entry that is not ignored and is
// >= 0, scanning algorithms then protocols; {-1, -1} when there is none.
std::pair<int, int> nccl_pick(const CostTable& table);

struct LogRecord {
  acs_nccl_log_level_t level;
  unsigned long flags;
  std::string text;
};

// NCCL's logger as the plugin sees it: records every line (formatted as NCCL would).
void fake_nccl_logger(acs_nccl_log_level_t level, unsigned long flags, const char* file, int line,
                      const char* format, ...);
std::vector<LogRecord> logged();
void clear_log();
// Lines at `level` containing `text`.
size_t count_logged(acs_nccl_log_level_t level, const std::string& text);

}  // namespace acspeed::testing
