// The tuner's search space: one list of values per knob (bucket size, algorithm, streams,
// compression, on GPUs NCCL algorithm/protocol/channels, PowerSGD rank, gradient as bucket view, on
// GPUs NCCL chunk size, on GPUs NCCL's sockets over TCP).
// A point is one index per knob; the strategies only see the knobs' sizes. What each knob is
// (its name, option, pin, default and how it sets a config) is its row in knobs.h: the functions
// below go through that table, so a new knob is its list here plus its row there.
//
// A knob pinned by an environment variable (ACSPEED_BUCKET_MB/_ALGORITHM/_STREAMS/_COMPRESSION/
// _POWERSGD_RANK/_NCCL_SOCKETS) holds only the pinned value and is not searched (Horovod's rule).
//
// The PowerSGD rank is one knob like the others; it only matters where the compression is powersgd:
// elsewhere config_at gives the same config for every rank value, and the session measures a config
// once, so those points cost nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "acspeed/config.h"

namespace acspeed::tuner {

using Point = std::vector<size_t>;  // one value index per knob, in SearchSpace::knob_names() order

struct SearchSpace {
  std::vector<double> bucket_mb = {kDdpDefaultBucketMb};  // MiB
  std::vector<Algorithm> algorithms = {Algorithm::kAllreduce};
  std::vector<int> streams = {1};
  std::vector<Compression> compression = {Compression::kNone};
  std::vector<int> powersgd_ranks = {kDefaultPowerSgdRank};  // searched when compression holds powersgd
  // NCCL (GPU only): "any" / 0 leave NCCL's own choice.
  std::vector<std::string> nccl_algorithms = {"any"};
  std::vector<std::string> nccl_protocols = {"any"};
  std::vector<int> nccl_channels = {0};
  // NCCL's chunk size in bytes (0: NCCL's own); set through the plugin's getChunkSize, which only
  // NCCL >= 2.30 calls. Not searched by default.
  std::vector<int64_t> nccl_chunk_bytes = {0};
  // DDP's gradient_as_bucket_view; false (DDP's default) leaves it unset. Not searched by default.
  std::vector<bool> grad_as_bucket_view = {false};
  // NCCL's sockets over TCP (nullopt: NCCL's choice), an instance knob: each value runs in workers
  // launched with it (trial_runner.h). Not searched by default; searched only where NCCL's net is
  // Socket on several nodes (nccl_net.h).
  std::vector<std::optional<NcclSockets>> nccl_sockets = {std::nullopt};
  std::vector<std::string> pinned;  // knobs pinned by the environment, with the variable: "streams (ACSPEED_STREAMS)"

  static const std::vector<std::string>& knob_names();  // knobs() order: bucket_mb, algorithm, ..., powersgd_rank, ...
  std::vector<size_t> dims() const;                      // values per knob
  size_t size() const;                                   // number of points (the grid)
  // The config a point stands for; bucket 25 MiB is left as DDP's default (unset).
  CommConfig config_at(const Point& point) const;
  // The point nearest to DDP's defaults (bucket nearest 25 MiB, allreduce, 1 stream, no compression,
  // NCCL's choice, PowerSGD rank 4, no bucket view; else the first listed): where searches start.
  Point default_point() const;
  // Point number `ordinal` in row-major order (the last knob varies fastest); ordinal < size().
  Point point_at(size_t ordinal) const;
  size_t ordinal_of(const Point& point) const;
  // "bucket 1,5,25,100 MiB x allreduce,reduce_scatter x streams 1,2 x compression none = 16 configs"
  std::string describe() const;
};

// The space as stored with a session (every knob's values, the pinned knobs, the size), for
// nlohmann::json (ADL).
void to_json(nlohmann::json& j, const SearchSpace& space);

// Strict list parsers for the CLI: comma-separated, no empty items, no duplicates; an error names
// the option, the bad item and what is accepted.
std::vector<double> parse_bucket_list(std::string_view option, std::string_view text);
std::vector<Algorithm> parse_algorithm_list(std::string_view option, std::string_view text);
std::vector<int> parse_streams_list(std::string_view option, std::string_view text);
std::vector<Compression> parse_compression_list(std::string_view option, std::string_view text);
std::vector<std::string> parse_nccl_choice_list(std::string_view option, std::string_view text,
                                                const std::vector<std::string>& accepted);
std::vector<int> parse_channels_list(std::string_view option, std::string_view text);
// NCCL chunk sizes: 0 (NCCL's choice) or kMinNcclChunkBytes to kMaxNcclChunkBytes bytes.
std::vector<int64_t> parse_chunk_bytes_list(std::string_view option, std::string_view text);
// NCCL sockets: 0 (NCCL's choice) or THREADSxSOCKETS (config.h's parse_nccl_sockets).
std::vector<std::optional<NcclSockets>> parse_nccl_sockets_list(std::string_view option, std::string_view text);
// PowerSGD ranks: integers 1 to kMaxPowerSgdRank (the hook clamps each to a matrix's smaller side).
std::vector<int> parse_powersgd_rank_list(std::string_view option, std::string_view text);
// Booleans (settings.h's parse_bool spellings: false,true).
std::vector<bool> parse_bool_list(std::string_view option, std::string_view text);
// The ranks searched when powersgd is: `--powersgd-ranks` when given, else 1,4,16 (16: the rank that
// kept plain DDP's accuracy on real data where 1 and 4 did not, bench/compression/RESULTS.md).
inline const std::vector<int> kDefaultPowerSgdRanks = {1, 4, 16};
// True when the space's compression list holds powersgd (a compression with a rank: comm_methods.h).
bool searches_powersgd(const SearchSpace& space);

// Restricts the knobs pinned by ACSPEED_BUCKET_MB/_ALGORITHM/_STREAMS/_COMPRESSION/_POWERSGD_RANK to their pinned
// value and records them in space.pinned. Bad values throw InvalidArgument.
void apply_pins(SearchSpace& space);

}  // namespace acspeed::tuner
