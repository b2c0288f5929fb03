// Reading JSON into acspeed's structs, strictly. Every from_json() beside a struct (config.h,
// decision_io.h, trial_metrics.h, protocol.h, the testbed's state.h) reads its fields through
// these, so a missing field or a wrong type is an InvalidArgument naming the field, what it must
// be and what it was; nlohmann's own exceptions never escape them.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "acspeed/error.h"

namespace acspeed::json_io {

using nlohmann::json;

// Parses `text`; InvalidArgument "`what` is not valid JSON: ..." otherwise (syntax, number overflow...).
json parse(std::string_view text, std::string_view what);

// The value's text for an error message, shortened.
std::string shown(const json& value);

[[noreturn]] void wrong_type(std::string_view key, std::string_view expected, const json& value);

namespace detail {
template <typename T>
struct is_vector : std::false_type {};
template <typename T>
struct is_vector<std::vector<T>> : std::true_type {};
}  // namespace detail

// `value` (the field `key`) as T: bool, an integer type (range-checked), double, std::string, a
// std::vector of these, or a type with its own from_json (whose InvalidArgument gets `key` in front).
template <typename T>
T as(const json& value, std::string_view key) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!value.is_boolean()) wrong_type(key, "true or false", value);
    return value.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (!value.is_number_integer()) wrong_type(key, "an integer", value);
    constexpr auto max = static_cast<uint64_t>(std::numeric_limits<T>::max());
    bool fits;
    if (value.is_number_unsigned()) {
      fits = value.get<uint64_t>() <= max;
    } else {
      const int64_t v = value.get<int64_t>();
      fits = v >= 0 ? static_cast<uint64_t>(v) <= max
                    : std::is_signed_v<T> && v >= static_cast<int64_t>(std::numeric_limits<T>::min());
    }
    if (!fits) wrong_type(key, "an integer in range", value);
    return value.get<T>();
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!value.is_number()) wrong_type(key, "a number", value);
    return value.get<T>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!value.is_string()) wrong_type(key, "a string", value);
    return value.get<std::string>();
  } else if constexpr (detail::is_vector<T>::value) {
    if (!value.is_array()) wrong_type(key, "an array", value);
    T out;
    for (size_t i = 0; i < value.size(); ++i) {
      out.push_back(as<typename T::value_type>(value[i], std::string(key) + "[" + std::to_string(i) + "]"));
    }
    return out;
  } else {
    try {
      return value.get<T>();
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(std::string(key) + ": " + e.what());
    } catch (const json::exception&) {
      wrong_type(key, "an object of its kind", value);
    }
  }
}

// Field `key` of object `j` as T; InvalidArgument when it is absent or of another type.
template <typename T>
T required(const json& j, std::string_view key) {
  const auto it = j.find(key);
  if (it == j.end()) ACS_THROW(InvalidArgument, "'{}' is missing", key);
  return as<T>(*it, key);
}

// Field `key` of object `j` as T; nullopt when it is absent or null.
template <typename T>
std::optional<T> optional(const json& j, std::string_view key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return as<T>(*it, key);
}

// Reads an optional field into `out`, leaving it as it is when the field is absent or null.
template <typename T>
void read(const json& j, std::string_view key, T& out) {
  if (auto value = optional<T>(j, key)) out = std::move(*value);
}
template <typename T>
void read(const json& j, std::string_view key, std::optional<T>& out) {
  out = optional<T>(j, key);
}

// Throws InvalidArgument unless `j` is an object; `what` names it.
void require_object(const json& j, std::string_view what);

}  // namespace acspeed::json_io
