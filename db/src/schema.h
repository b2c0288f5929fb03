// The store's schema as ordered migrations: migrations()[i] takes user_version i to i + 1.
#pragma once

#include <vector>

namespace acspeed {

struct Migration {
  int to_version;
  const char* description;
  const char* sql;
};

const std::vector<Migration>& migrations();

}  // namespace acspeed
