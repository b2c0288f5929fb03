// The store's schema as ordered migrations: migrations()[i] takes user_version i to i + 1.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace acspeed {

struct Migration {
  int to_version;
  const char* description;
  const char* sql;
};

const std::vector<Migration>& migrations();

// A column a migration added to a table that existed before, and the SQL value the rows of a store
// older than that migration read as.
struct AddedColumn {
  int version;  // the migration's to_version
  const char* table;
  const char* column;
  const char* before;
};
const std::vector<AddedColumn>& added_columns();

// The columns `table` lacks in a store at schema `version`, each with the value its rows read as.
std::map<std::string, std::string> absent_columns(const std::string& table, int version);

}  // namespace acspeed
