// The store's rows by name (private to db/): the one place that maps each table's columns to its
// record's fields. The current schema itself is db/schema.sql. Each Row's visit(record, f) calls
// f(column, field, insert) once per column; the store builds its INSERT and SELECT lists from these
// and binds and reads every value by its column's name.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "acspeed/store.h"
#include "sqlite.h"

namespace acspeed::rows {

// The store's clock, as SQL: UTC ISO-8601 with milliseconds.
inline constexpr const char* kNow = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";

// What an INSERT writes into a column.
enum class Insert {
  kBound,       // the field's value
  kSkipped,     // nothing: SQLite assigns it (id), or a later update sets it (NULL until then)
  kNow,         // the store's clock; the field is ignored
  kBoundOrNow,  // the field's value, or the store's clock when the field is empty
};

// A decision's config as stored: its JSON text. A text that is not a valid config reads as DDP's
// defaults, with `error` saying why.
template <class Config, class Text>
struct StoredConfig {
  Config& config;
  Text& error;
};
template <class Config, class Text>
StoredConfig(Config&, Text&) -> StoredConfig<Config, Text>;

struct InstanceTypeRow {
  static constexpr const char* kTable = "instance_types";
  using Record = InstanceTypeRecord;
  template <class R, class F>
  static void visit(R& r, F&& f) {
    f("key", r.key, Insert::kBound);
    f("explicit_name", r.explicit_name, Insert::kBound);
    f("detected_key", r.detected_key, Insert::kBound);
    f("details_json", r.details_json, Insert::kBound);
    f("first_seen", r.first_seen, Insert::kNow);
    f("last_seen", r.last_seen, Insert::kNow);
  }
};

struct SessionRow {
  static constexpr const char* kTable = "sessions";
  using Record = SessionRecord;
  template <class R, class F>
  static void visit(R& r, F&& f) {
    f("id", r.id, Insert::kSkipped);
    f("instance_type", r.instance_type, Insert::kBound);
    f("model_name", r.model_name, Insert::kBound);
    f("model_signature", r.model_signature, Insert::kBound);
    f("precision", r.precision, Insert::kBound);
    f("world_size", r.world_size, Insert::kBound);
    f("nnodes", r.nnodes, Insert::kBound);
    f("batch_size", r.batch_size, Insert::kBound);
    f("strategy", r.strategy, Insert::kBound);
    f("seed", r.seed, Insert::kBound);
    f("search_space_json", r.search_space_json, Insert::kBound);
    f("options_json", r.options_json, Insert::kBound);
    f("versions_json", r.versions_json, Insert::kBound);
    f("status", r.status, Insert::kBound);
    f("started_at", r.started_at, Insert::kNow);
    f("finished_at", r.finished_at, Insert::kSkipped);  // set by finish_session; NULL reads as ""
  }
};

struct TrialRow {
  static constexpr const char* kTable = "trials";
  using Record = TrialRecord;
  template <class R, class F>
  static void visit(R& r, F&& f) {
    f("id", r.id, Insert::kSkipped);
    f("session_id", r.session_id, Insert::kBound);
    f("ordinal", r.ordinal, Insert::kBound);
    f("role", r.role, Insert::kBound);
    f("config_json", r.config_json, Insert::kBound);
    f("status", r.status, Insert::kBound);
    f("error", r.error, Insert::kBound);
    f("step_times_json", r.step_times_s, Insert::kBound);
    f("metrics_json", r.metrics_json, Insert::kBound);
    f("started_at", r.started_at, Insert::kBoundOrNow);
    f("finished_at", r.finished_at, Insert::kBoundOrNow);
  }
};

// The columns a decision is keyed by (a part of DecisionRow).
struct DecisionKeyRow {
  using Record = DecisionKey;
  template <class R, class F>
  static void visit(R& r, F&& f) {
    f("instance_type", r.instance_type, Insert::kBound);
    f("model_signature", r.model_signature, Insert::kBound);
    f("precision", r.precision, Insert::kBound);
    f("world_size", r.world_size, Insert::kBound);
    f("nnodes", r.nnodes, Insert::kBound);
    f("gpus_shared", r.gpus_shared, Insert::kBound);  // schema 4
  }
};

struct DecisionRow {
  static constexpr const char* kTable = "decisions";
  using Record = Decision;
  template <class R, class F>
  static void visit(R& r, F&& f) {
    f("id", r.id, Insert::kSkipped);
    DecisionKeyRow::visit(r.key, f);
    f("model_name", r.model_name, Insert::kBound);
    f("config_json", StoredConfig{r.config, r.config_error}, Insert::kBound);
    f("active", r.active, Insert::kBound);
    f("session_id", r.session_id, Insert::kBound);
    f("torch_version", r.torch_version, Insert::kBound);
    f("nccl_version", r.nccl_version, Insert::kBound);
    f("cuda_version", r.cuda_version, Insert::kBound);
    f("batch_size", r.batch_size, Insert::kBound);
    f("speedup", r.speedup, Insert::kBound);
    f("ci_low", r.ci_low, Insert::kBound);
    f("ci_high", r.ci_high, Insert::kBound);
    f("evidence_json", r.evidence_json, Insert::kBound);
    f("note", r.note, Insert::kBound);
    f("created_at", r.created_at, Insert::kNow);
  }
};

// One field's value into parameter `:column`, and back from column `column` of the current row.
// A stored value that is not what the field holds is an InvalidArgument naming the column.
void bind_field(sqlite::Statement& s, const std::string& column, const std::string& value);
void bind_field(sqlite::Statement& s, const std::string& column, int64_t value);
void bind_field(sqlite::Statement& s, const std::string& column, bool value);
void bind_field(sqlite::Statement& s, const std::string& column, const std::optional<int64_t>& value);
void bind_field(sqlite::Statement& s, const std::string& column, const std::optional<double>& value);
void bind_field(sqlite::Statement& s, const std::string& column, const std::vector<double>& value);
void bind_field(sqlite::Statement& s, const std::string& column,
                const StoredConfig<const CommConfig, const std::string>& value);
void read_field(const sqlite::Statement& s, const std::string& column, std::string& value);
void read_field(const sqlite::Statement& s, const std::string& column, int64_t& value);
void read_field(const sqlite::Statement& s, const std::string& column, bool& value);
void read_field(const sqlite::Statement& s, const std::string& column, std::optional<int64_t>& value);
void read_field(const sqlite::Statement& s, const std::string& column, std::optional<double>& value);
void read_field(const sqlite::Statement& s, const std::string& column, std::vector<double>& value);
void read_field(const sqlite::Statement& s, const std::string& column,
                const StoredConfig<CommConfig, std::string>& value);

// The row's columns as a SELECT list. `absent` maps a column an older schema lacks to the SQL value
// it reads as (a training job reads an old store without migrating it).
template <class Row>
std::string select_list(const std::map<std::string, std::string>& absent = {}) {
  std::string out;
  typename Row::Record r;
  Row::visit(r, [&](const std::string& column, auto&&, Insert) {
    if (!out.empty()) out += ", ";
    const auto it = absent.find(column);
    out += it == absent.end() ? column : it->second + " AS " + column;
  });
  return out;
}

// "INSERT INTO <table>(<columns>) VALUES (<:column, the store's clock...>)" for bind<Row>().
template <class Row>
std::string insert_sql() {
  std::string columns, values;
  typename Row::Record r;
  Row::visit(r, [&](const std::string& column, auto&&, Insert insert) {
    if (insert == Insert::kSkipped) return;
    if (!columns.empty()) {
      columns += ", ";
      values += ", ";
    }
    columns += column;
    if (insert == Insert::kBound) values += ":" + column;
    if (insert == Insert::kNow) values += kNow;
    if (insert == Insert::kBoundOrNow) values += "coalesce(nullif(:" + column + ", ''), " + kNow + ")";
  });
  return "INSERT INTO " + std::string(Row::kTable) + "(" + columns + ") VALUES (" + values + ")";
}

// "<column> = :<column> AND ..." over the row's columns (all of them bound), for bind<Row>().
template <class Row>
std::string equal_clause() {
  std::string out;
  typename Row::Record r;
  Row::visit(r, [&](const std::string& column, auto&&, Insert) {
    if (!out.empty()) out += " AND ";
    out += column + " = :" + column;
  });
  return out;
}

// Binds every parameter insert_sql<Row>() (or equal_clause<Row>()) names from the record.
template <class Row>
void bind(sqlite::Statement& s, const typename Row::Record& r) {
  Row::visit(r, [&](const std::string& column, const auto& field, Insert insert) {
    if (insert == Insert::kBound || insert == Insert::kBoundOrNow) bind_field(s, column, field);
  });
}

// The current row of a SELECT of select_list<Row>() as a record.
template <class Row>
void read(const sqlite::Statement& s, typename Row::Record& r) {
  Row::visit(r, [&](const std::string& column, auto&& field, Insert) { read_field(s, column, field); });
}

}  // namespace acspeed::rows
