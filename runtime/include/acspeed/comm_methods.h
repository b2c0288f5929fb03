// What each gradient algorithm and each compression is, one row each: the capabilities that the
// comm hook (python/acspeed/engine/state.py), the tuner's step model and byte counts, the convergence
// guard, the plan's notes and the reports ask about, instead of comparing names.
//
// To add a compression: one row in compressions() (comm_methods.cc) and its value in config.h's
// enum, plus its own module on the Python side (the way python/acspeed/engine/powersgd.py is PowerSGD's);
// the hook, the worker, the step model, the guard, the hint, the CLI and the reports read the row.
// To add an algorithm: one row in algorithms() and its class in python/acspeed/engine/algorithms.py.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "acspeed/config.h"

namespace acspeed {

struct AlgorithmInfo {
  Algorithm kind;
  std::string_view name;  // the config's name (algorithm_names())
  // Works node by node (intra-node steps, then one step among the nodes): needs the ranks' node
  // topology, its inter-node traffic scales with the nodes rather than the ranks, and it is worth
  // searching only on several nodes.
  bool by_node;
  // Phases of a bucket whose collectives cross nodes: the lane slots of role "all" or "inter" in
  // python/acspeed/engine/algorithms.py's roles. Where each phase has a group of its own (gloo), each is a
  // flow of its own that can overlap the others (the tuner's flow count, tuner/include/acspeed/tuner/flows.h).
  int crossing_phases;
};

// How a compressed bucket travels.
enum class WireForm {
  kAsIs,     // the gradients' own dtype
  kCast,     // cast to a narrower float (cast_dtype), divided in it, cast back (torch's compress hooks)
  kLowRank,  // each gradient matrix as low-rank factors with error feedback; 1-D gradients as they are
};

struct CompressionInfo {
  Compression kind;
  std::string_view name;          // the config's name (compression_names())
  std::string_view display_name;  // for people: "fp16", "PowerSGD"
  int since_schema;               // the config schema version that first names it (config.h)
  WireForm form;
  std::string_view cast_dtype;    // kCast: the torch dtype's name ("float16"); "" otherwise
  int cast_bytes;                 // kCast: bytes per element on the wire; 0 otherwise
  // Changes the gradients' numerics: searched only when asked, judged by the convergence guard.
  bool changes_numerics;
  // Spends compute of its own per step (the worker reports it as compression_s; the step model's K).
  bool own_compute;
  // Collectives a compressed bucket issues per one of the algorithm's (the step model's latency
  // count): PowerSGD's P, Q and the 1-D gradients' sum.
  int collectives_per_bucket;
  // Has a rank and a start step (powersgd_rank, powersgd_start_step); before the start step a
  // bucket is reduced uncompressed, so timed steps must come after it.
  bool ranked;
};

const std::vector<AlgorithmInfo>& algorithms();
const std::vector<CompressionInfo>& compressions();
const AlgorithmInfo& info(Algorithm algorithm);
const CompressionInfo& info(Compression compression);

// The algorithm reduces as the flat all-reduce does where a node has at most `ranks_per_node` ranks:
// a flat one always; one that works node by node where its intra-node steps have nothing to do (one
// rank per node: it issues the flat all-reduce's collectives on the same group, its numerics bit for
// bit: tests/python/test_powersgd.py). Then it is not searched (it would measure allreduce again) and
// shares the flat config's convergence-guard verdict.
bool reduces_as_flat(Algorithm algorithm, int ranks_per_node);

// The compressions that spend compute of their own, joined with "/": their names ("powersgd"), or
// with `display` their display names ("PowerSGD"); what a column or a line of that compute is called.
std::string own_compute_names(bool display);

// The config's compression changes the gradients' numerics (the convergence guard judges it).
inline bool changes_numerics(const CommConfig& config) { return info(config.compression).changes_numerics; }

// Bytes per element the hook sends for a gradient element of `element_bytes` under `compression`
// (a low-rank factor's element: the gradients' dtype promoted to at least fp32).
int64_t wire_element_bytes(const CompressionInfo& compression, int element_bytes);

}  // namespace acspeed
