#include "acspeed/tuner/knobs.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "acspeed/comm_methods.h"
#include "acspeed/error.h"
#include "acspeed/tuner/defaults.h"
#include "acspeed/tuner/search_space.h"

namespace acspeed::tuner {
namespace {

// How one value reads in the plan and in the stored space.
std::string text_of(double v) { return fmt::format("{}", v); }
std::string text_of(int v) { return std::to_string(v); }
std::string text_of(int64_t v) { return std::to_string(v); }
std::string text_of(const std::string& v) { return v; }
std::string text_of(Algorithm v) { return std::string(to_string(v)); }
std::string text_of(Compression v) { return std::string(to_string(v)); }
std::string text_of(bool v) { return v ? "true" : "false"; }
std::string text_of(const std::optional<NcclSockets>& v) { return to_string(v); }

nlohmann::json json_of(double v) { return v; }
nlohmann::json json_of(int v) { return v; }
nlohmann::json json_of(int64_t v) { return v; }
nlohmann::json json_of(const std::string& v) { return v; }
nlohmann::json json_of(Algorithm v) { return to_string(v); }
nlohmann::json json_of(Compression v) { return to_string(v); }
nlohmann::json json_of(bool v) { return v; }
nlohmann::json json_of(const std::optional<NcclSockets>& v) { return to_string(v); }

template <typename T>
std::string joined(const std::vector<T>& values) {
  std::vector<std::string> texts;
  for (const auto& v : values) texts.push_back(text_of(static_cast<T>(v)));
  return fmt::format("{}", fmt::join(texts, ","));
}

template <typename T>
size_t index_or_zero(const std::vector<T>& values, const T& wanted) {
  const auto it = std::find(values.begin(), values.end(), wanted);
  return it == values.end() ? 0 : static_cast<size_t>(it - values.begin());
}

// The NCCL knobs share one rule ("any" collective), made by the first of them that changes something.
NcclRule& nccl_rule(CommConfig& c) {
  if (c.nccl_rules.empty()) {
    NcclRule rule;
    rule.collective = "any";
    c.nccl_rules.push_back(rule);
  }
  return c.nccl_rules.front();
}

// What a row says about its values; list_knob() makes the row's functions from it.
template <typename T>
struct Values {
  std::vector<T> SearchSpace::*member;
  T ddp_default;  // the value that leaves the config as DDP has it: the default point's
  std::string label;  // the plan's "{}" format for the joined values: "streams {}"
  // The plan names the knob only when this says so (empty: always).
  std::function<bool(const SearchSpace&)> described;
  std::function<std::vector<T>(std::string_view option, std::string_view text)> parse;
  std::function<void(const T&, CommConfig&)> apply;
  std::function<T(const CommConfig&)> value_in;  // the knob's value in a config (what a pin or the job set)
};

template <typename T>
Knob list_knob(std::string name, std::string option, std::string pin_variable, std::function<std::string()> help,
               Values<T> v) {
  Knob k;
  k.name = std::move(name);
  k.option = std::move(option);
  k.pin_variable = std::move(pin_variable);
  k.help = std::move(help);
  const auto member = v.member;
  k.count = [member](const SearchSpace& s) { return (s.*member).size(); };
  k.apply = [member, apply = v.apply](const SearchSpace& s, size_t i, CommConfig& c) { apply((s.*member)[i], c); };
  k.default_index = [member, d = v.ddp_default](const SearchSpace& s) { return index_or_zero(s.*member, d); };
  k.to_json = [member](const SearchSpace& s) {
    nlohmann::json values = nlohmann::json::array();
    for (const auto& value : s.*member) values.push_back(json_of(static_cast<T>(value)));
    return values;
  };
  k.describe = [member, label = v.label, described = v.described](const SearchSpace& s) -> std::string {
    if (described && !described(s)) return "";
    return fmt::format(fmt::runtime(label), joined(s.*member));
  };
  k.parse = [member, parse = v.parse](SearchSpace& s, std::string_view option, std::string_view text) {
    s.*member = parse(option, text);
  };
  k.pin = [member, value_in = v.value_in](SearchSpace& s, const CommConfig& c) { s.*member = {value_in(c)}; };
  return k;
}

// Described only when it holds something other than its default.
template <typename T>
std::function<bool(const SearchSpace&)> when_searched(std::vector<T> SearchSpace::*member, T ddp_default) {
  return [member, ddp_default](const SearchSpace& s) {
    return (s.*member).size() > 1 || (s.*member)[0] != ddp_default;
  };
}

std::string both(const std::string& gpu, const std::string& cpu) {
  return fmt::format("default {}; {} without a GPU", gpu, cpu);
}

std::vector<Knob> make_knobs() {
  std::vector<Knob> k;
  k.push_back(list_knob<double>(
      "bucket_mb", "bucket-mb", "ACSPEED_BUCKET_MB",
      [] {
        return fmt::format("bucket sizes to search, MiB ({})",
                           both(joined(tune_defaults(true).bucket_mb), joined(tune_defaults(false).bucket_mb)));
      },
      {&SearchSpace::bucket_mb, kDdpDefaultBucketMb, "bucket {} MiB", {}, parse_bucket_list,
       [](double mb, CommConfig& c) {
         if (mb != kDdpDefaultBucketMb) c.bucket_cap_mb = mb;  // DDP's own default stays unset
       },
       [](const CommConfig& c) { return c.bucket_cap_mb.value_or(kDdpDefaultBucketMb); }}));
  k.back().switchable = true;  // a rebuilt reducer (DDP's __setstate__ route)
  k.back().ddp_argument = "bucket_cap_mb";
  // The bucket nearest to DDP's 25 MiB (on a log scale) starts the search, listed or not.
  k.back().default_index = [](const SearchSpace& s) {
    size_t best = 0;
    for (size_t i = 1; i < s.bucket_mb.size(); ++i) {
      if (std::abs(std::log(s.bucket_mb[i] / kDdpDefaultBucketMb)) <
          std::abs(std::log(s.bucket_mb[best] / kDdpDefaultBucketMb))) {
        best = i;
      }
    }
    return best;
  };
  k.push_back(list_knob<Algorithm>(
      "algorithm", "algorithms", "ACSPEED_ALGORITHM",
      [] {
        std::vector<std::string> flat, by_node;
        for (const auto& a : algorithms()) (a.by_node ? by_node : flat).emplace_back(a.name);
        return fmt::format("{} (default: {}, and {} on several nodes of several ranks)",
                           fmt::join(algorithm_names(), ","), fmt::join(flat, ","), fmt::join(by_node, ","));
      },
      {&SearchSpace::algorithms, Algorithm::kAllreduce, "{}", {}, parse_algorithm_list,
       [](Algorithm a, CommConfig& c) { c.algorithm = a; }, [](const CommConfig& c) { return c.algorithm; }}));
  k.back().switchable = true;  // the hook's config, replaced at bucket 0
  k.back().unset = [](SearchSpace& s, const KnobContext& context) {
    // Those that work node by node only where there are nodes, and ranks to reduce within one.
    const int nodes = std::max(1, context.nnodes);
    const int ranks_per_node = (context.world_size + nodes - 1) / nodes;  // the most on a node
    s.algorithms.clear();
    for (const auto& a : algorithms()) {
      if (!a.by_node || (nodes > 1 && !reduces_as_flat(a.kind, ranks_per_node))) s.algorithms.push_back(a.kind);
    }
  };
  k.push_back(list_knob<int>(
      "streams", "streams", "ACSPEED_STREAMS",
      [] {
        return fmt::format("stream counts to search ({})",
                           both(joined(tune_defaults(true).streams), joined(tune_defaults(false).streams)));
      },
      {&SearchSpace::streams, 1, "streams {}", {}, parse_streams_list, [](int n, CommConfig& c) { c.streams = n; },
       [](const CommConfig& c) { return c.streams; }}));
  k.back().switchable = true;  // the hook's config; every rank creates the new lanes' groups in one order
  k.push_back(list_knob<Compression>(
      "compression", "compression", "ACSPEED_COMPRESSION",
      [] {
        return fmt::format("{}: searched only when given (changes numerics; every compressed config passes the "
                           "convergence guard or is rejected)",
                           fmt::join(compression_names(), ","));
      },
      {&SearchSpace::compression, Compression::kNone, "compression {}", {}, parse_compression_list,
       [](Compression x, CommConfig& c) { c.compression = x; }, [](const CommConfig& c) { return c.compression; }}));
  k.push_back(list_knob<std::string>(
      "nccl_algorithm", "nccl-algorithms", "", [] { return std::string("GPU: NCCL algorithms to search (any,ring,tree,...)"); },
      {&SearchSpace::nccl_algorithms, std::string("any"), "NCCL algorithm {}",
       when_searched(&SearchSpace::nccl_algorithms, std::string("any")),
       [](std::string_view option, std::string_view text) {
         return parse_nccl_choice_list(option, text, nccl_algorithm_names());
       },
       [](const std::string& name, CommConfig& c) {
         if (name != "any") nccl_rule(c).algorithm = name;
       },
       [](const CommConfig& c) { return c.nccl_rules.empty() ? std::string("any") : c.nccl_rules.front().algorithm; }}));
  k.back().needs_gpu = true;
  k.back().switchable = true;  // the plugin's live rules setter, every rank at the same boundary
  k.push_back(list_knob<std::string>(
      "nccl_protocol", "nccl-protocols", "", [] { return std::string("GPU: NCCL protocols to search (any,ll,ll128,simple)"); },
      {&SearchSpace::nccl_protocols, std::string("any"), "NCCL protocol {}",
       when_searched(&SearchSpace::nccl_protocols, std::string("any")),
       [](std::string_view option, std::string_view text) {
         return parse_nccl_choice_list(option, text, nccl_protocol_names());
       },
       [](const std::string& name, CommConfig& c) {
         if (name != "any") nccl_rule(c).protocol = name;
       },
       [](const CommConfig& c) { return c.nccl_rules.empty() ? std::string("any") : c.nccl_rules.front().protocol; }}));
  k.back().needs_gpu = true;
  k.back().switchable = true;
  k.push_back(list_knob<int>(
      "nccl_channels", "nccl-channels", "", [] { return std::string("GPU: NCCL channel counts to search (0 = NCCL's choice)"); },
      {&SearchSpace::nccl_channels, 0, "NCCL channels {}", when_searched(&SearchSpace::nccl_channels, 0),
       parse_channels_list,
       [](int n, CommConfig& c) {
         if (n != 0) nccl_rule(c).channels = n;
       },
       [](const CommConfig& c) { return c.nccl_rules.empty() ? 0 : c.nccl_rules.front().channels; }}));
  k.back().needs_gpu = true;
  k.back().switchable = true;
  k.push_back(list_knob<int>(
      "powersgd_rank", "powersgd-ranks", "ACSPEED_POWERSGD_RANK",
      [] {
        return fmt::format("PowerSGD ranks searched with --compression ...,powersgd (default {})",
                           joined(kDefaultPowerSgdRanks));
      },
      {&SearchSpace::powersgd_ranks, kDefaultPowerSgdRank, "powersgd rank {}", searches_powersgd,
       parse_powersgd_rank_list,
       [](int rank, CommConfig& c) {
         if (info(c.compression).ranked) c.powersgd_rank = rank;  // other configs do not use it
       },
       [](const CommConfig& c) { return c.powersgd_rank; }}));
  k.back().parse = [](SearchSpace& s, std::string_view option, std::string_view text) {
    s.powersgd_ranks = parse_powersgd_rank_list(option, text);
    if (!searches_powersgd(s)) {
      ACS_THROW(InvalidArgument, "{} '{}' needs powersgd in --compression (e.g. --compression none,powersgd)", option,
                text);
    }
  };
  k.back().unset = [](SearchSpace& s, const KnobContext&) {
    if (searches_powersgd(s)) s.powersgd_ranks = kDefaultPowerSgdRanks;
  };
  k.push_back(list_knob<bool>(
      "gradient_as_bucket_view", "grad-as-bucket-view", "",
      [] {
        return std::string("DDP's gradient_as_bucket_view values to search, false,true (default: not searched, "
                           "DDP's false: gradients are not views into the buckets)");
      },
      {&SearchSpace::grad_as_bucket_view, false, "grad-as-bucket-view {}",
       when_searched(&SearchSpace::grad_as_bucket_view, false), parse_bool_list,
       [](bool view, CommConfig& c) {
         if (view) c.gradient_as_bucket_view = true;  // false is DDP's own default: left unset
       },
       [](const CommConfig& c) { return c.gradient_as_bucket_view.value_or(false); }}));
  k.back().ddp_argument = "gradient_as_bucket_view";
  k.push_back(list_knob<int64_t>(
      "nccl_chunk_bytes", "nccl-chunk-bytes", "",
      [] {
        return fmt::format("GPU: NCCL chunk sizes to search, bytes (0 = NCCL's choice, else {} to {}; set only by "
                           "NCCL >= 2.30, whose tuner ABI v6 asks for them; default: not searched)",
                           kMinNcclChunkBytes, kMaxNcclChunkBytes);
      },
      {&SearchSpace::nccl_chunk_bytes, int64_t{0}, "NCCL chunk {} B",
       when_searched(&SearchSpace::nccl_chunk_bytes, int64_t{0}), parse_chunk_bytes_list,
       [](int64_t bytes, CommConfig& c) {
         if (bytes != 0) nccl_rule(c).chunk_bytes = bytes;
       },
       [](const CommConfig& c) {
         return c.nccl_rules.empty() ? int64_t{0} : c.nccl_rules.front().chunk_bytes.value_or(0);
       }}));
  k.back().needs_gpu = true;
  k.back().switchable = true;  // the plugin's live rules setter, as the other NCCL knobs
  // One row for both of NCCL's variables: NCCL caps their product (64 sockets), which a grid of two
  // rows would cross (16 threads x 8 sockets), and what they change, the TCP connections per NCCL
  // connection, is their product (flows.h).
  k.push_back(list_knob<std::optional<NcclSockets>>(
      "nccl_sockets", "nccl-sockets", "ACSPEED_NCCL_SOCKETS",
      [] {
        return fmt::format("GPU, several nodes: NCCL's sockets over TCP to search, THREADSxSOCKETS per thread "
                           "(e.g. 0,1x1,2x4; 0 = NCCL's choice; threads 1 to {}, threads x sockets at most {}); "
                           "searched only where NCCL's net is Socket; each value runs in workers launched with "
                           "NCCL_SOCKET_NTHREADS/NCCL_NSOCKS_PERTHREAD set (default: not searched)",
                           kMaxNcclSocketThreads, kMaxNcclSockets);
      },
      {&SearchSpace::nccl_sockets, std::optional<NcclSockets>{}, "NCCL sockets {}",
       when_searched(&SearchSpace::nccl_sockets, std::optional<NcclSockets>{}), parse_nccl_sockets_list,
       [](const std::optional<NcclSockets>& sockets, CommConfig& c) { c.nccl_sockets = sockets; },
       [](const CommConfig& c) { return c.nccl_sockets; }}));
  k.back().needs_gpu = true;
  k.back().before_communicator = true;  // NCCL reads them once per process: never switched in a live job
  return k;
}

}  // namespace

const std::vector<Knob>& knobs() {
  static const std::vector<Knob> table = make_knobs();
  return table;
}

}  // namespace acspeed::tuner
