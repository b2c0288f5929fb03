// Fuzz target: the command line's list options (tuner/src/search_space.cc's strict list parsers
// behind --bucket-mb, --algorithms, --streams, --compression, --nccl-algorithms, --nccl-protocols, --nccl-chunk-bytes, --nccl-sockets,
// --nccl-channels). The input is given to every parser.
// Properties: any text is either a list or an InvalidArgument; a list is non-empty, without
// duplicates, and its items are within what the option accepts.
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "acspeed/config.h"
#include "acspeed/error.h"
#include "acspeed/tuner/search_space.h"
#include "fuzz_check.h"

namespace {

template <typename T>
void check_list(const char* option, const std::vector<T>& items, const std::string& text) {
  if (items.empty()) acspeed::fuzz::broken("a parsed list is not empty", std::string(option) + " " + text);
  const std::set<T> distinct(items.begin(), items.end());
  if (distinct.size() != items.size()) acspeed::fuzz::broken("a parsed list has no duplicates", std::string(option) + " " + text);
}

template <typename Parse>
void parse_or_refuse(Parse parse) {
  try {
    parse();
  } catch (const acspeed::InvalidArgument&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace acspeed;
  using namespace acspeed::tuner;
  const std::string text = fuzz::text_of(data, size);
  parse_or_refuse([&] {
    const auto buckets = parse_bucket_list("--bucket-mb", text);
    check_list("--bucket-mb", buckets, text);
    for (double mb : buckets) {
      if (!std::isfinite(mb) || mb <= 0 || mb > 65536) fuzz::broken("bucket sizes are within (0, 65536] MiB", text);
    }
  });
  parse_or_refuse([&] { check_list("--algorithms", parse_algorithm_list("--algorithms", text), text); });
  parse_or_refuse([&] {
    const auto streams = parse_streams_list("--streams", text);
    check_list("--streams", streams, text);
    for (int s : streams) {
      if (s < 1 || s > 64) fuzz::broken("streams are within 1..64", text);
    }
  });
  parse_or_refuse([&] { check_list("--compression", parse_compression_list("--compression", text), text); });
  parse_or_refuse([&] {
    const auto algos = parse_nccl_choice_list("--nccl-algorithms", text, nccl_algorithm_names());
    check_list("--nccl-algorithms", algos, text);
    for (const auto& a : algos) {
      const auto& names = nccl_algorithm_names();
      if (std::find(names.begin(), names.end(), a) == names.end()) fuzz::broken("NCCL choices are accepted names", text);
    }
  });
  parse_or_refuse([&] {
    const auto protos = parse_nccl_choice_list("--nccl-protocols", text, nccl_protocol_names());
    check_list("--nccl-protocols", protos, text);
    const auto& names = nccl_protocol_names();
    for (const auto& p : protos) {
      if (std::find(names.begin(), names.end(), p) == names.end()) fuzz::broken("NCCL choices are accepted names", text);
    }
  });
  parse_or_refuse([&] {
    const auto ranks = parse_powersgd_rank_list("--powersgd-ranks", text);
    check_list("--powersgd-ranks", ranks, text);
    for (int r : ranks) {
      if (r < 1 || r > kMaxPowerSgdRank) fuzz::broken("PowerSGD ranks are within 1..kMaxPowerSgdRank", text);
    }
  });
  parse_or_refuse([&] {
    const auto channels = parse_channels_list("--nccl-channels", text);
    check_list("--nccl-channels", channels, text);
    for (int c : channels) {
      if (c < 0 || c > 64) fuzz::broken("channels are within 0..64", text);
    }
  });
  parse_or_refuse([&] {
    const auto chunks = parse_chunk_bytes_list("--nccl-chunk-bytes", text);
    check_list("--nccl-chunk-bytes", chunks, text);
    for (int64_t c : chunks) {
      if (c != 0 && (c < kMinNcclChunkBytes || c > kMaxNcclChunkBytes)) {
        fuzz::broken("chunk sizes are 0 or within kMinNcclChunkBytes..kMaxNcclChunkBytes", text);
      }
    }
  });
  parse_or_refuse([&] {
    const auto sockets = parse_nccl_sockets_list("--nccl-sockets", text);
    std::vector<std::string> spelled;  // "0", "2x4": one spelling per value
    for (const auto& v : sockets) spelled.push_back(to_string(v));
    check_list("--nccl-sockets", spelled, text);
    for (const auto& v : sockets) {
      if (v && (v->threads < 1 || v->threads > kMaxNcclSocketThreads || v->per_thread < 1 ||
                v->sockets() > kMaxNcclSockets)) {
        fuzz::broken("NCCL sockets are 0 or within NCCL's limits (16 threads, 64 sockets)", text);
      }
    }
  });
  return 0;
}
