#include "acspeed/tuner/search_space.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "acspeed/error.h"
#include "acspeed/settings.h"

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

size_t nearest(const std::vector<double>& values, double target) {
  size_t best = 0;
  for (size_t i = 1; i < values.size(); ++i) {
    if (std::abs(std::log(values[i] / target)) < std::abs(std::log(values[best] / target))) best = i;
  }
  return best;
}

template <typename T>
size_t index_or_zero(const std::vector<T>& values, const T& wanted) {
  const auto it = std::find(values.begin(), values.end(), wanted);
  return it == values.end() ? 0 : static_cast<size_t>(it - values.begin());
}

}  // namespace

const std::vector<std::string>& SearchSpace::knob_names() {
  static const std::vector<std::string> names = {"bucket_mb",      "algorithm",     "streams",       "compression",
                                                 "nccl_algorithm", "nccl_protocol", "nccl_channels", "powersgd_rank"};
  return names;
}

std::vector<size_t> SearchSpace::dims() const {
  return {bucket_mb.size(),       algorithms.size(),     streams.size(),        compression.size(),
          nccl_algorithms.size(), nccl_protocols.size(), nccl_channels.size(), powersgd_ranks.size()};
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
  if (bucket_mb[p[0]] != kDdpDefaultBucketMb) config.bucket_cap_mb = bucket_mb[p[0]];
  config.algorithm = algorithms[p[1]];
  config.streams = streams[p[2]];
  config.compression = compression[p[3]];
  if (config.compression == Compression::kPowerSgd) config.powersgd_rank = powersgd_ranks[p[7]];
  if (nccl_algorithms[p[4]] != "any" || nccl_protocols[p[5]] != "any" || nccl_channels[p[6]] != 0) {
    NcclRule rule;
    rule.collective = "any";
    rule.algorithm = nccl_algorithms[p[4]];
    rule.protocol = nccl_protocols[p[5]];
    rule.channels = nccl_channels[p[6]];
    config.nccl_rules.push_back(rule);
  }
  config.validate();
  return config;
}

Point SearchSpace::default_point() const {
  return {nearest(bucket_mb, kDdpDefaultBucketMb),
          index_or_zero(algorithms, Algorithm::kAllreduce),
          index_or_zero(streams, 1),
          index_or_zero(compression, Compression::kNone),
          index_or_zero(nccl_algorithms, std::string("any")),
          index_or_zero(nccl_protocols, std::string("any")),
          index_or_zero(nccl_channels, 0),
          index_or_zero(powersgd_ranks, kDefaultPowerSgdRank)};
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
  j = {{"bucket_mb", s.bucket_mb},
       {"algorithm", nlohmann::json::array()},
       {"streams", s.streams},
       {"compression", nlohmann::json::array()},
       {"nccl_algorithm", s.nccl_algorithms},
       {"nccl_protocol", s.nccl_protocols},
       {"nccl_channels", s.nccl_channels},
       {"powersgd_rank", s.powersgd_ranks},
       {"pinned", s.pinned},
       {"size", s.size()}};
  for (auto a : s.algorithms) j["algorithm"].push_back(to_string(a));
  for (auto c : s.compression) j["compression"].push_back(to_string(c));
}

std::string SearchSpace::describe() const {
  std::vector<std::string> algos, comps;
  for (auto a : algorithms) algos.emplace_back(to_string(a));
  for (auto c : compression) comps.emplace_back(to_string(c));
  std::string text = fmt::format("bucket {} MiB x {} x streams {} x compression {}", fmt::join(bucket_mb, ","),
                                 fmt::join(algos, ","), fmt::join(streams, ","), fmt::join(comps, ","));
  if (searches_powersgd(*this)) text += fmt::format(" x powersgd rank {}", fmt::join(powersgd_ranks, ","));
  if (nccl_algorithms.size() > 1 || nccl_protocols.size() > 1 || nccl_channels.size() > 1 ||
      nccl_algorithms[0] != "any" || nccl_protocols[0] != "any" || nccl_channels[0] != 0) {
    text += fmt::format(" x NCCL algorithm {} x protocol {} x channels {}", fmt::join(nccl_algorithms, ","),
                        fmt::join(nccl_protocols, ","), fmt::join(nccl_channels, ","));
  }
  return text + fmt::format(" = {} config{}", size(), size() == 1 ? "" : "s");
}

std::vector<double> parse_bucket_list(std::string_view option, std::string_view text) {
  return parse_items<double>(option, text, [&](const std::string& item) {
    double mb = 0;
    try {
      mb = parse_float(option, item);
    } catch (const InvalidArgument&) {
      ACS_THROW(InvalidArgument, "{} item '{}' is not a size in MiB (accepted: numbers > 0 and <= 65536, e.g. 1,5,25,100)",
                option, item);
    }
    if (!(std::isfinite(mb) && mb > 0 && mb <= 65536)) {
      ACS_THROW(InvalidArgument, "{} item '{}' is out of range (accepted: a size in MiB > 0 and <= 65536)", option, item);
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
      return static_cast<int>(parse_int(option, item, 1, 64));
    } catch (const InvalidArgument&) {
      ACS_THROW(InvalidArgument, "{} item '{}' is not a stream count (accepted: integers 1 to 64)", option, item);
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
      return static_cast<int>(parse_int(option, item, 0, 64));
    } catch (const InvalidArgument&) {
      ACS_THROW(InvalidArgument, "{} item '{}' is not a channel count (accepted: integers 0 to 64, 0 = NCCL's choice)",
                option, item);
    }
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
  return std::find(space.compression.begin(), space.compression.end(), Compression::kPowerSgd) !=
         space.compression.end();
}

void apply_pins(SearchSpace& space) {
  CommConfig pins;
  for (const auto& field : apply_env_pins(pins)) {
    if (field == "bucket_cap_mb") {
      space.bucket_mb = {*pins.bucket_cap_mb};
      space.pinned.push_back("bucket_mb (ACSPEED_BUCKET_MB)");
    } else if (field == "algorithm") {
      space.algorithms = {pins.algorithm};
      space.pinned.push_back("algorithm (ACSPEED_ALGORITHM)");
    } else if (field == "streams") {
      space.streams = {pins.streams};
      space.pinned.push_back("streams (ACSPEED_STREAMS)");
    } else if (field == "compression") {
      space.compression = {pins.compression};
      space.pinned.push_back("compression (ACSPEED_COMPRESSION)");
    } else if (field == "powersgd_rank") {
      space.powersgd_ranks = {pins.powersgd_rank};
      space.pinned.push_back("powersgd_rank (ACSPEED_POWERSGD_RANK)");
    }
  }
}

}  // namespace acspeed::tuner
