#include "rows.h"

#include <nlohmann/json.hpp>

#include "acspeed/error.h"
#include "acspeed/json_io.h"

namespace acspeed::rows {

void bind_field(sqlite::Statement& s, const std::string& column, const std::string& value) { s.bind(column, value); }
void bind_field(sqlite::Statement& s, const std::string& column, int64_t value) { s.bind(column, value); }
void bind_field(sqlite::Statement& s, const std::string& column, bool value) { s.bind(column, int64_t{value}); }
void bind_field(sqlite::Statement& s, const std::string& column, const std::optional<int64_t>& value) {
  s.bind(column, value);
}
void bind_field(sqlite::Statement& s, const std::string& column, const std::optional<double>& value) {
  s.bind(column, value);
}
void bind_field(sqlite::Statement& s, const std::string& column, const std::vector<double>& value) {
  s.bind(column, nlohmann::json(value).dump());
}
void bind_field(sqlite::Statement& s, const std::string& column,
                const StoredConfig<const CommConfig, const std::string>& value) {
  s.bind(column, config_to_json(value.config));
}

void read_field(const sqlite::Statement& s, const std::string& column, std::string& value) { value = s.text(column); }
void read_field(const sqlite::Statement& s, const std::string& column, int64_t& value) { value = s.int64(column); }
void read_field(const sqlite::Statement& s, const std::string& column, bool& value) { value = s.int64(column) != 0; }
void read_field(const sqlite::Statement& s, const std::string& column, std::optional<int64_t>& value) {
  value = s.is_null(column) ? std::nullopt : std::optional<int64_t>(s.int64(column));
}
void read_field(const sqlite::Statement& s, const std::string& column, std::optional<double>& value) {
  value = s.is_null(column) ? std::nullopt : std::optional<double>(s.real(column));
}
void read_field(const sqlite::Statement& s, const std::string& column, std::vector<double>& value) {
  value = json_io::as<std::vector<double>>(json_io::parse(s.text(column), column), column);
}
void read_field(const sqlite::Statement& s, const std::string& column,
                const StoredConfig<CommConfig, std::string>& value) {
  try {
    value.config = config_from_json(s.text(column));
  } catch (const InvalidArgument& e) {
    value.error = e.what();
  }
}

}  // namespace acspeed::rows
