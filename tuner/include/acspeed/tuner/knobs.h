// The search space's knobs: one row per knob holds everything the search space (search_space.h),
// the environment pins, the stored space, the plan and acspeed-tune's options know about it: its
// name, its option and help, the variable that pins it, how its values are parsed, which value is
// DDP's default, how a value sets a CommConfig, and how the plan describes it.
//
// To add a knob: its list of values in SearchSpace, and one row at the END of knobs() (knobs.cc)
// (a point is one value index per knob in this order, and stored sessions keep their points'
// ordinals: a knob with one value leaves every ordinal as it was). Everything else follows: the
// grid, the strategies (they only see the knobs' sizes), config_at, the default point, the stored
// search_space JSON, the plan's description, the pins, and the tune command's option, help and
// parsing. Its default should be a single value that leaves the config as DDP has it, so that a
// session that does not ask for the knob plans exactly the configs it planned before.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "acspeed/config.h"

namespace acspeed::tuner {

struct SearchSpace;

// What a knob's default values depend on when its option is not given.
struct KnobContext {
  int nnodes = 1;
  int world_size = 1;  // ranks in all; hierarchical is searched only where a node has several
  bool gpu = false;
};

struct Knob {
  std::string name;          // knob_names() entry and stored search_space key: "bucket_mb"
  std::string option;        // acspeed-tune's option, without "--": "bucket-mb"
  std::string pin_variable;  // the ACSPEED_* setting that pins it (settings.h); "" when none does
  bool needs_gpu = false;    // NCCL's knobs: refused on a machine without a GPU
  // True when a live job may switch it between two steps without changing its numerics: online
  // tuning (online.h) searches exactly these (when not pinned). False for compression (changes
  // numerics), for what DDP fixes at construction and the job's code may rely on
  // (gradient_as_bucket_view: gradients become views into the buckets), and for instance knobs.
  bool switchable = false;
  // True for a knob of the instance, not the model: set at `import acspeed` before any
  // communicator exists, because the library reads it once per process (NCCL's socket variables);
  // never switched inside a job, so never switchable.
  bool before_communicator = false;
  // The DDP constructor argument (and the config JSON key, which has DDP's name) this knob sets;
  // "" when DDP has no such argument. A job's own value of that argument pins the knob online.
  std::string ddp_argument;
  std::function<std::string()> help;  // the option's help (its default, and the CPU-only machine's)
  std::function<size_t(const SearchSpace&)> count;  // values listed
  // Puts value `index` into `config` (knobs earlier in knobs() were applied first).
  std::function<void(const SearchSpace&, size_t index, CommConfig& config)> apply;
  std::function<size_t(const SearchSpace&)> default_index;  // the value nearest to DDP's defaults
  std::function<nlohmann::json(const SearchSpace&)> to_json;  // its values in the stored space
  std::function<std::string(const SearchSpace&)> describe;  // "streams 1,2"; "" when the plan leaves it out
  // Sets the values from the option's text; InvalidArgument names the option, the item and what is accepted.
  std::function<void(SearchSpace&, std::string_view option, std::string_view text)> parse;
  // The values when the option is not given (unset: keep what the space holds: its default or the
  // machine's, defaults.h).
  std::function<void(SearchSpace&, const KnobContext&)> unset;
  // Restricts the knob to its value in `pinned`: what its pin variable set (apply_env_pins, config.h),
  // or, online, the job's own value of a knob it does not search.
  std::function<void(SearchSpace&, const CommConfig& pinned)> pin;
};

// Every knob, in point order.
const std::vector<Knob>& knobs();

}  // namespace acspeed::tuner
