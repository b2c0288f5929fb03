#include "acspeed/tuner/search_space.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "acspeed/comm_methods.h"
#include "acspeed/error.h"
#include "acspeed/settings.h"
#include "acspeed/tuner/knobs.h"

namespace acspeed::tuner {
namespace {

std::vector<std::string> split_list(std::string_view option, std::string_view text) {
  std::vector<std::string> items;
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    std::string item(text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) ACS_THROW(InvalidArgument, "{} '{}' has an empty item (accepted: a comma-separated list)", option, text);
    if (std::find(items.begin(), items.end(), item) != items.end()) {
      ACS_THROW(InvalidArgument, "{} '{}' lists '{}' twice", option, text, item);
    }
    items.push_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return items;
}

// split_list refuses an item spelled twice; this refuses two spellings of one value ("1,01", "5,5.0").
template <typename T, typename Parse>
std::vector<T> parse_items(std::string_view option, std::string_view text, Parse parse) {
  const auto items = split_list(option, text);
  std::vector<T> values;
  for (const auto& item : items) {
    T value = parse(item);
    const auto same = std::find(values.begin(), values.end(), value);
    if (same != values.end()) {
      ACS_THROW(InvalidArgument, "{} '{}' lists one value twice, as '{}' and as '{}'", option, text,
                items[static_cast<size_t>(same - values.begin())], item);
    }
    values.push_back(std::move(value));
  }
  return values;
}

std::string join_names(const std::vector<std::string>& names) {
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

const std::vector<std::string>& SearchSpace::knob_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& knob : knobs()) out.push_back(knob.name);
    return out;
  }();
  return names;
}

std::vector<size_t> SearchSpace::dims() const {
  std::vector<size_t> d;
  for (const auto& knob : knobs()) d.push_back(knob.count(*this));
  return d;
}

size_t SearchSpace::size() const {
  size_t n = 1;
  for (size_t d : dims()) n *= d;
  return n;
}

CommConfig SearchSpace::config_at(const Point& p) const {
  const auto d = dims();
  ACS_ENFORCE_EQ(p.size(), d.size(), "a point has one index per knob");
  for (size_t i = 0; i < d.size(); ++i) ACS_ENFORCE(p[i] < d[i], "knob {} index {} >= {}", knob_names()[i], p[i], d[i]);
  CommConfig config;
  for (size_t i = 0; i < d.size(); ++i) knobs()[i].apply(*this, p[i], config);
  config.validate();
  return config;
}

Point SearchSpace::default_point() const {
  Point p;
  for (const auto& knob : knobs()) p.push_back(knob.default_index(*this));
  return p;
}

Point SearchSpace::point_at(size_t ordinal) const {
  ACS_ENFORCE(ordinal < size(), "point {} of a space of {}", ordinal, size());
  const auto d = dims();
  Point p(d.size());
  for (size_t i = d.size(); i-- > 0;) {
    p[i] = ordinal % d[i];
    ordinal /= d[i];
  }
  return p;
}

size_t SearchSpace::ordinal_of(const Point& p) const {
  const auto d = dims();
  size_t ordinal = 0;
  for (size_t i = 0; i < d.size(); ++i) ordinal = ordinal * d[i] + p[i];
  return ordinal;
}

void to_json(nlohmann::json& j, const SearchSpace& s) {
  j = nlohmann::json::object();
  for (const auto& knob : knobs()) j[knob.name] = knob.to_json(s);
  j["pinned"] = s.pinned;
  j["size"] = s.size();
}

std::string SearchSpace::describe() const {
  std::vector<std::string> parts;
  for (const auto& knob : knobs()) {
    if (std::string part = knob.describe(*this); !part.empty()) parts.push_back(std::move(part));
  }
  return fmt::format("{} = {} config{}", fmt::join(parts, " x "), size(), size() == 1 ? "" : "s");
}

std::vector<double> parse_bucket_list(std::string_view option, std::string_view text) {
  return parse_items<double>(option, text, [&](const std::string& item) {
    double mb = 0;
    try {
      mb = parse_float(option, item);
    } catch (const InvalidArgument&) {
      ACS_THROW(InvalidArgument, "{} item '{}' is not a size in MiB (accepted: numbers > 0 and <= {:g}, e.g. 1,5,25,100)",
                option, item, kMaxBucketMb);
    }
    if (!(std::isfinite(mb) && mb > 0 && mb <= kMaxBucketMb)) {
      ACS_THROW(InvalidArgument, "{} item '{}' is out of range (accepted: a size in MiB > 0 and <= {:g})", option, item,
                kMaxBucketMb);
    }
    return mb;
  });
}

std::vector<Algorithm> parse_algorithm_list(std::string_view option, std::string_view text) {
  return parse_items<Algorithm>(option, text, [&](const std::string& item) {
    try {
      return parse_algorithm(item);
    } catch (const InvalidArgument&) {
      ACS_THROW(InvalidArgument, "{} item '{}' is not an algorithm (accepted: {})", option, item,
                join_names(algorithm_names()));
    }
  });
}

std::vector<int> parse_streams_list(std::string_view option, std::string_view text) {
  return parse_items<int>(option, text, [&](const std::string& item) {
    try {
      return static_cast<int>(parse_int(option, item, 1, kMaxStreams));
    } catch (const InvalidArgument&) {
      ACS_THROW(InvalidArgument, "{} item '{}' is not a stream count (accepted: integers 1 to {})", option, item,
                kMaxStreams);
    }
  });
}

std::vector<Compression> parse_compression_list(std::string_view option, std::string_view text) {
  return parse_items<Compression>(option, text, [&](const std::string& item) {
    try {
      return parse_compression(item);
    } catch (const InvalidArgument&) {
      ACS_THROW(InvalidArgument, "{} item '{}' is not a compression (accepted: {})", option, item,
                join_names(compression_names()));
    }
  });
}

std::vector<std::string> parse_nccl_choice_list(std::string_view option, std::string_view text,
                                                const std::vector<std::string>& accepted) {
  return parse_items<std::string>(option, text, [&](const std::string& item) {
    if (std::find(accepted.begin(), accepted.end(), item) == accepted.end()) {
      ACS_THROW(InvalidArgument, "{} item '{}' is not accepted (accepted: {})", option, item, join_names(accepted));
    }
    return item;
  });
}

std::vector<int> parse_channels_list(std::string_view option, std::string_view text) {
  return parse_items<int>(option, text, [&](const std::string& item) {
    try {
      return static_cast<int>(parse_int(option, item, 0, kMaxNcclChannels));
    } catch (const InvalidArgument&) {
      ACS_THROW(InvalidArgument, "{} item '{}' is not a channel count (accepted: integers 0 to {}, 0 = NCCL's choice)",
                option, item, kMaxNcclChannels);
    }
  });
}

std::vector<std::optional<NcclSockets>> parse_nccl_sockets_list(std::string_view option, std::string_view text) {
  return parse_items<std::optional<NcclSockets>>(option, text,
                                                 [&](const std::string& item) { return parse_nccl_sockets(option, item); });
}

std::vector<int64_t> parse_chunk_bytes_list(std::string_view option, std::string_view text) {
  return parse_items<int64_t>(option, text, [&](const std::string& item) {
    try {
      const int64_t bytes = parse_int(option, item, 0, kMaxNcclChunkBytes);
      if (bytes == 0 || bytes >= kMinNcclChunkBytes) return bytes;
    } catch (const InvalidArgument&) {  // not an integer, or above the maximum: said below
    }
    ACS_THROW(InvalidArgument,
              "{} item '{}' is not an NCCL chunk size (accepted: 0 = NCCL's choice, or integers {} to {} bytes)",
              option, item, kMinNcclChunkBytes, kMaxNcclChunkBytes);
  });
}

std::vector<int> parse_powersgd_rank_list(std::string_view option, std::string_view text) {
  return parse_items<int>(option, text, [&](const std::string& item) {
    try {
      return static_cast<int>(parse_int(option, item, 1, kMaxPowerSgdRank));
    } catch (const InvalidArgument&) {
      ACS_THROW(InvalidArgument,
                "{} item '{}' is not a PowerSGD rank (accepted: integers 1 to {}; each is clamped per tensor to the "
                "matrix's smaller side)",
                option, item, kMaxPowerSgdRank);
    }
  });
}

bool searches_powersgd(const SearchSpace& space) {
  return std::any_of(space.compression.begin(), space.compression.end(),
                     [](Compression c) { return info(c).ranked; });
}

std::vector<bool> parse_bool_list(std::string_view option, std::string_view text) {
  return parse_items<bool>(option, text, [&](const std::string& item) {
    try {
      return parse_bool(option, item);
    } catch (const InvalidArgument&) {
      ACS_THROW(InvalidArgument, "{} item '{}' is not a boolean (accepted: false, true)", option, item);
    }
  });
}

void apply_pins(SearchSpace& space) {
  CommConfig pins;
  apply_env_pins(pins);  // validates every pin; bad values throw
  for (const auto& knob : knobs()) {
    if (knob.pin_variable.empty() || !setting_raw(knob.pin_variable)) continue;
    knob.pin(space, pins);
    space.pinned.push_back(fmt::format("{} ({})", knob.name, knob.pin_variable));
  }
}

}  // namespace acspeed::tuner
