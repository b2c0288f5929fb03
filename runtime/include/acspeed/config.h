// The communication config: everything acspeed can change about how DDP communicates.
// One versioned JSON schema (documented in runtime/CONFIG.md) used by the store, the CLI,
// ACSPEED_CONFIG, the trial worker and the NCCL plugin.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace acspeed {

// 2 added compression "powersgd" with powersgd_rank and powersgd_start_step; a version-1 config
// is read as version 2 with those fields at their defaults (it cannot name powersgd).
inline constexpr int kConfigSchemaVersion = 2;
inline constexpr int kOldestConfigSchemaVersion = 1;
inline constexpr int kDefaultPowerSgdRank = 4;
inline constexpr int kDefaultPowerSgdStartStep = 10;
inline constexpr int kMaxPowerSgdRank = 1 << 16;  // far above any matrix side; the hook clamps per tensor
// The ranges every reader of a config checks (validation, the tuner's lists, the ACSPEED_* pins).
inline constexpr double kDdpDefaultBucketMb = 25.0;  // DDP's bucket_cap_mb when a config leaves it unset
inline constexpr double kMaxBucketMb = 65536;        // bucket sizes are > 0 and <= this (MiB)
inline constexpr int kMaxStreams = 64;               // streams are 1..kMaxStreams
inline constexpr int kMaxNcclChannels = 64;          // an NCCL rule's channels are 0 (NCCL's choice)..this
// An NCCL rule's chunk_bytes, when set: at least NCCL's largest protocol grain (LL128: 3840 bytes), so
// that NCCL's alignment never rounds it down to 0; NCCL clamps anything above its buffer.
inline constexpr int64_t kMinNcclChunkBytes = 4096;
inline constexpr int64_t kMaxNcclChunkBytes = int64_t{1} << 30;
// NCCL's socket transport (src/transport/net_socket.cc, MAX_THREADS and MAX_SOCKETS, the same from
// 2.28 to 2.30): at most 16 helper threads per connection and 64 sockets in all; above either NCCL
// lowers the value itself with a warning, so a config never holds such a value.
inline constexpr int kMaxNcclSocketThreads = 16;
inline constexpr int kMaxNcclSockets = 64;

// How gradient buckets are reduced.
enum class Algorithm {
  kAllreduce,      // flat allreduce of each bucket (DDP's own algorithm)
  kReduceScatter,  // reduce-scatter + all-gather
  kHierarchical,   // intra-node reduce, inter-node allreduce, intra-node broadcast
};
// kPowerSgd: low-rank factors of each gradient matrix (PowerSGD, Vogels et al. 2019) with error
// feedback and warm start; 1-D gradients go uncompressed (python/acspeed/engine/powersgd.py).
enum class Compression { kNone, kFp16, kBf16, kPowerSgd };

std::string_view to_string(Algorithm value);
std::string_view to_string(Compression value);
// Throw InvalidArgument naming the value and the accepted names.
Algorithm parse_algorithm(std::string_view text);
Compression parse_compression(std::string_view text);
const std::vector<std::string>& algorithm_names();
const std::vector<std::string>& compression_names();

// One NCCL tuning rule: for `collective` messages of [min_bytes, max_bytes), prefer `algorithm`
// with `protocol`, use `channels` channels and chunks of `chunk_bytes`. "any" leaves that choice to
// NCCL; channels 0 leaves NCCL's channel count; no chunk_bytes leaves NCCL's chunk size (set only by
// NCCL >= 2.30, tuner ABI v6). The first matching rule wins.
struct NcclRule {
  std::string collective = "allreduce";  // allreduce|allgather|reducescatter|broadcast|reduce|any
  int64_t min_bytes = 0;
  int64_t max_bytes = std::numeric_limits<int64_t>::max();
  std::string algorithm = "any";  // tree|ring|collnet_direct|collnet_chain|nvls|nvls_tree|pat|any
  std::string protocol = "any";   // ll|ll128|simple|any
  int channels = 0;               // 0..kMaxNcclChannels
  std::optional<int64_t> chunk_bytes;  // kMinNcclChunkBytes..kMaxNcclChunkBytes; nullopt: NCCL's

  bool operator==(const NcclRule& other) const;
};

// How many TCP connections NCCL's socket transport opens per network connection (one per channel
// and peer) when its net is Socket (no InfiniBand/RDMA device, no net plugin): `threads` helper
// threads (NCCL_SOCKET_NTHREADS) x `per_thread` sockets each (NCCL_NSOCKS_PERTHREAD). NCCL reads
// both once per process, so they are set before any communicator exists (`import acspeed`, the
// tuner's worker launch), never switched inside a job. "TxS" as text: "2x4".
struct NcclSockets {
  int threads = 1;     // 1..kMaxNcclSocketThreads
  int per_thread = 1;  // 1..kMaxNcclSockets, threads x per_thread <= kMaxNcclSockets

  int sockets() const { return threads * per_thread; }
  // Throws InvalidArgument naming the value and what is accepted.
  void validate() const;
  bool operator==(const NcclSockets& other) const;
  bool operator!=(const NcclSockets& other) const { return !(*this == other); }
};
// "2x4"; NCCL's choice (nullopt) is "0".
std::string to_string(const std::optional<NcclSockets>& value);
// "TxS" (e.g. "2x4"), validated, or "0" for NCCL's choice (nullopt); InvalidArgument names `what`
// ("--nccl-sockets", a variable), the text and what is accepted.
std::optional<NcclSockets> parse_nccl_sockets(std::string_view what, std::string_view text);
// The variables NCCL reads them from: NCCL_SOCKET_NTHREADS, NCCL_NSOCKS_PERTHREAD (in that order).
std::vector<std::pair<std::string, std::string>> nccl_socket_variables(const NcclSockets& value);

const std::vector<std::string>& nccl_collective_names();
const std::vector<std::string>& nccl_algorithm_names();
const std::vector<std::string>& nccl_protocol_names();

struct CommConfig {
  // DDP constructor knobs; nullopt keeps DDP's own default.
  std::optional<double> bucket_cap_mb;           // MiB, > 0 (DDP default kDdpDefaultBucketMb)
  std::optional<double> first_bucket_mb;         // MiB, > 0 (DDP default 1)
  std::optional<bool> gradient_as_bucket_view;   // DDP default false
  // Communication hook.
  Algorithm algorithm = Algorithm::kAllreduce;
  int streams = 1;  // extra process groups the buckets are spread over, 1..kMaxStreams
  Compression compression = Compression::kNone;
  // PowerSGD (used only with compression powersgd): the rank of the factors, 1..kMaxPowerSgdRank,
  // clamped per tensor to the matrix's smaller side; the steps run with plain allreduce before it starts.
  int powersgd_rank = kDefaultPowerSgdRank;
  int powersgd_start_step = kDefaultPowerSgdStartStep;  // >= 0
  // NCCL tuner plugin rules (GPU only).
  std::vector<NcclRule> nccl_rules;
  // NCCL's sockets over TCP (GPU only, several nodes): nullopt leaves NCCL's choice. An instance
  // knob: `import acspeed` sets it before any communicator, from the decisions of this instance
  // type and node count (resolve.h's resolve_instance_knobs); the DDP patch ignores it.
  std::optional<NcclSockets> nccl_sockets;

  // True when applying this config needs a DDP comm hook; false for DDP's built-in allreduce.
  bool needs_comm_hook() const;
  // True when the config changes nothing: DDP's defaults.
  bool is_default() const;
  // Cross-field validation; throws InvalidArgument naming the field, the value and what is accepted.
  void validate() const;
  // One line for humans: "bucket 5 MiB, reduce_scatter, 2 streams, fp16".
  std::string describe() const;

  bool operator==(const CommConfig& other) const;
};

// The schema-versioned JSON of a config (runtime/CONFIG.md), for nlohmann::json (ADL): a config
// travels inside other documents (decisions, the trial protocol, reports) as an object, never as
// text parsed again. from_json validates; a missing or newer schema version, a wrong type or a bad
// value throws InvalidArgument naming the field; unknown keys are ignored.
void to_json(nlohmann::json& j, const NcclRule& rule);
void to_json(nlohmann::json& j, const CommConfig& config);
void from_json(const nlohmann::json& j, CommConfig& config);

// The same as text: what the store's column, ACSPEED_CONFIG files and the NCCL plugin hold.
std::string config_to_json(const CommConfig& config, int indent = -1);
// Parses and validates; unknown keys are reported in `warnings` (if given) and ignored.
CommConfig config_from_json(std::string_view text, std::vector<std::string>* warnings = nullptr);

// Applies the pins from ACSPEED_BUCKET_MB / _ALGORITHM / _STREAMS / _COMPRESSION / _POWERSGD_RANK /
// _NCCL_SOCKETS ("0": NCCL's choice), returning the
// names of the fields pinned (bad values throw InvalidArgument).
std::vector<std::string> apply_env_pins(CommConfig& config);

}  // namespace acspeed
