#include "acspeed/tuner/search_space.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "../support/error_text.h"
#include "../support/scoped_env.h"
#include <nlohmann/json.hpp>

#include "acspeed/error.h"
#include "acspeed/tuner/knobs.h"

namespace acspeed::tuner {
namespace {

using testing::ScopedEnv;

const auto error_of = testing::invalid_argument_text;

// A knob's place in a point.
size_t knob_index(const std::string& name) {
  const auto& names = SearchSpace::knob_names();
  const auto it = std::find(names.begin(), names.end(), name);
  EXPECT_NE(it, names.end()) << name;
  return static_cast<size_t>(it - names.begin());
}

TEST(SearchSpace, ParsesLists) {
  EXPECT_EQ(parse_bucket_list("--bucket-mb", "1,5,25,100"), (std::vector<double>{1, 5, 25, 100}));
  EXPECT_EQ(parse_bucket_list("--bucket-mb", " 2.5 "), (std::vector<double>{2.5}));
  EXPECT_EQ(parse_algorithm_list("--algorithms", "allreduce,hierarchical"),
            (std::vector<Algorithm>{Algorithm::kAllreduce, Algorithm::kHierarchical}));
  EXPECT_EQ(parse_streams_list("--streams", "1,2,4"), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(parse_compression_list("--compression", "none,fp16"),
            (std::vector<Compression>{Compression::kNone, Compression::kFp16}));
  EXPECT_EQ(parse_channels_list("--nccl-channels", "0,8"), (std::vector<int>{0, 8}));
  EXPECT_EQ(parse_chunk_bytes_list("--nccl-chunk-bytes", "0,4096,1073741824"),
            (std::vector<int64_t>{0, 4096, 1073741824}));
}

TEST(SearchSpace, NcclChunkBytesIsAGpuKnobNotSearchedByDefaultThatSetsTheSharedRule) {
  const size_t knob = knob_index("nccl_chunk_bytes");
  const auto& row = knobs()[knob];
  EXPECT_EQ(row.option, "nccl-chunk-bytes");
  EXPECT_TRUE(row.needs_gpu);
  EXPECT_TRUE(row.pin_variable.empty());
  SearchSpace space;
  EXPECT_EQ(space.dims()[knob], 1u);
  EXPECT_EQ(space.describe(), "bucket 25 MiB x allreduce x streams 1 x compression none = 1 config");
  EXPECT_EQ(nlohmann::json(space)["nccl_chunk_bytes"], nlohmann::json::array({0}));

  space.nccl_channels = {0, 8};
  space.nccl_chunk_bytes = parse_chunk_bytes_list("--nccl-chunk-bytes", "0,262144");
  ASSERT_EQ(space.size(), 4u);
  EXPECT_NE(space.describe().find("x NCCL channels 0,8 x NCCL chunk 0,262144 B = 4 configs"), std::string::npos)
      << space.describe();
  const Point start = space.default_point();
  EXPECT_EQ(start[knob], 0u);
  EXPECT_TRUE(space.config_at(start).is_default());  // 0: NCCL's chunk, no rule
  Point chunk_only = start;
  chunk_only[knob] = 1;
  const CommConfig chunked = space.config_at(chunk_only);
  ASSERT_EQ(chunked.nccl_rules.size(), 1u);
  EXPECT_EQ(chunked.nccl_rules[0].collective, "any");
  EXPECT_EQ(chunked.nccl_rules[0].channels, 0);
  EXPECT_EQ(chunked.nccl_rules[0].chunk_bytes, std::optional<int64_t>(262144));
  const CommConfig both = space.config_at(space.point_at(space.size() - 1));
  ASSERT_EQ(both.nccl_rules.size(), 1u);  // channels and chunk share the one rule
  EXPECT_EQ(both.nccl_rules[0].channels, 8);
  EXPECT_EQ(both.nccl_rules[0].chunk_bytes, std::optional<int64_t>(262144));

  for (const char* bad : {"4095", "-1", "1073741825", "64k", "0,00"}) {
    EXPECT_FALSE(error_of([&] { parse_chunk_bytes_list("--nccl-chunk-bytes", bad); }).empty()) << bad;
  }
  EXPECT_NE(error_of([] { parse_chunk_bytes_list("--nccl-chunk-bytes", "0,100"); })
                .find("--nccl-chunk-bytes item '100' is not an NCCL chunk size (accepted: 0 = NCCL's choice, or "
                      "integers 4096 to 1073741824 bytes)"),
            std::string::npos);
}

TEST(SearchSpace, PowerSgdRankIsOneKnobThatOnlyPowerSgdConfigsUse) {
  SearchSpace space;
  space.compression = {Compression::kNone, Compression::kPowerSgd};
  space.powersgd_ranks = {1, 4};
  EXPECT_EQ(space.size(), 4u);
  EXPECT_NE(space.describe().find("x compression none,powersgd x powersgd rank 1,4 = 4 configs"), std::string::npos)
      << space.describe();
  std::set<std::string> configs;
  for (size_t i = 0; i < space.size(); ++i) configs.insert(config_to_json(space.config_at(space.point_at(i))));
  EXPECT_EQ(configs.size(), 3u);  // none (whatever the rank index), powersgd rank 1, powersgd rank 4
  const Point start = space.default_point();
  EXPECT_EQ(space.config_at(start).compression, Compression::kNone);
  Point rank1 = start;
  rank1[3] = 1;
  rank1[7] = 0;
  EXPECT_EQ(space.config_at(rank1).powersgd_rank, 1);
  EXPECT_EQ(space.config_at(rank1).describe(), "allreduce, powersgd rank 1");
  EXPECT_TRUE(searches_powersgd(space));
  const nlohmann::json j = space;
  EXPECT_EQ(j["powersgd_rank"], nlohmann::json::array({1, 4}));
}

TEST(SearchSpace, PowerSgdRanksParseStrictlyAndAPinIsNotSearched) {
  EXPECT_EQ(parse_powersgd_rank_list("--powersgd-ranks", "1,4,16"), (std::vector<int>{1, 4, 16}));
  for (const char* bad : {"0", "-1", "2.5", "four"}) {
    const auto msg = error_of([bad] { parse_powersgd_rank_list("--powersgd-ranks", bad); });
    EXPECT_NE(msg.find(fmt::format("'{}' is not a PowerSGD rank (accepted: integers 1 to", bad)), std::string::npos)
        << msg;
  }
  ScopedEnv pin("ACSPEED_POWERSGD_RANK", "2");
  SearchSpace space;
  space.compression = {Compression::kPowerSgd};
  space.powersgd_ranks = {1, 4};
  apply_pins(space);
  EXPECT_EQ(space.powersgd_ranks, (std::vector<int>{2}));
  EXPECT_EQ(space.pinned, (std::vector<std::string>{"powersgd_rank (ACSPEED_POWERSGD_RANK)"}));
}

TEST(SearchSpace, BadItemsNameTheValueAndWhatIsAccepted) {
  auto msg = error_of([] { parse_bucket_list("--bucket-mb", "1,abc"); });
  EXPECT_NE(msg.find("'abc'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--bucket-mb"), std::string::npos) << msg;
  msg = error_of([] { parse_bucket_list("--bucket-mb", "-5"); });
  EXPECT_NE(msg.find("'-5'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("> 0"), std::string::npos) << msg;
  msg = error_of([] { parse_algorithm_list("--algorithms", "allreduce,ring"); });
  EXPECT_NE(msg.find("'ring'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("reduce_scatter"), std::string::npos) << msg;
  msg = error_of([] { parse_streams_list("--streams", "0"); });
  EXPECT_NE(msg.find("1 to 64"), std::string::npos) << msg;
  msg = error_of([] { parse_compression_list("--compression", "int8"); });
  EXPECT_NE(msg.find("fp16"), std::string::npos) << msg;
  msg = error_of([] { parse_streams_list("--streams", "1,,2"); });
  EXPECT_NE(msg.find("empty"), std::string::npos) << msg;
  msg = error_of([] { parse_streams_list("--streams", "2,2"); });
  EXPECT_NE(msg.find("twice"), std::string::npos) << msg;
  msg = error_of([] { parse_nccl_choice_list("--nccl-protocols", "fast", {"ll", "simple"}); });
  EXPECT_NE(msg.find("'fast'"), std::string::npos) << msg;
}

// Found by fuzz_cli_lists (tests/fuzz/corpus/cli_lists/crash-two-spellings-of-one-value): two
// spellings of one value were a duplicate trial point.
TEST(SearchSpace, TwoSpellingsOfOneValueAreADuplicate) {
  auto msg = error_of([] { parse_bucket_list("--bucket-mb", "01,1,10e2"); });
  EXPECT_NE(msg.find("as '01' and as '1'"), std::string::npos) << msg;
  msg = error_of([] { parse_bucket_list("--bucket-mb", "5,5.0"); });
  EXPECT_NE(msg.find("as '5' and as '5.0'"), std::string::npos) << msg;
  msg = error_of([] { parse_streams_list("--streams", "2,02"); });
  EXPECT_NE(msg.find("twice"), std::string::npos) << msg;
  msg = error_of([] { parse_channels_list("--nccl-channels", "0,00"); });
  EXPECT_NE(msg.find("twice"), std::string::npos) << msg;
  EXPECT_EQ(parse_bucket_list("--bucket-mb", "1,10e2"), (std::vector<double>{1, 1000}));
}

TEST(SearchSpace, EnumeratesEveryPointOnceAndMapsToConfigs) {
  SearchSpace space;
  space.bucket_mb = {5, 25};
  space.algorithms = {Algorithm::kAllreduce, Algorithm::kReduceScatter};
  space.streams = {1, 2, 4};
  ASSERT_EQ(space.size(), 12u);
  std::set<std::string> configs;
  for (size_t i = 0; i < space.size(); ++i) {
    const Point p = space.point_at(i);
    EXPECT_EQ(space.ordinal_of(p), i);
    configs.insert(config_to_json(space.config_at(p)));
  }
  EXPECT_EQ(configs.size(), 12u);
  const Point d = space.default_point();
  EXPECT_TRUE(space.config_at(d).is_default());  // 25 MiB, allreduce, 1 stream = DDP's defaults
  EXPECT_EQ(*space.config_at(space.point_at(0)).bucket_cap_mb, 5.0);
  const nlohmann::json j = space;
  EXPECT_EQ(j.at("size"), 12);
  EXPECT_NE(space.describe().find("= 12 configs"), std::string::npos) << space.describe();
}

TEST(SearchSpace, NcclKnobsBecomeOneRuleOnlyWhenTheyChangeSomething) {
  SearchSpace space;
  space.nccl_protocols = {"any", "simple"};
  space.nccl_channels = {0, 8};
  ASSERT_EQ(space.size(), 4u);
  const CommConfig nccl_choice = space.config_at(space.default_point());
  EXPECT_TRUE(nccl_choice.nccl_rules.empty());  // "any" and 0 channels leave NCCL's own choice
  EXPECT_TRUE(nccl_choice.is_default());
  const CommConfig tuned = space.config_at(space.point_at(space.size() - 1));
  ASSERT_EQ(tuned.nccl_rules.size(), 1u);
  EXPECT_EQ(tuned.nccl_rules[0].collective, "any");
  EXPECT_EQ(tuned.nccl_rules[0].protocol, "simple");
  EXPECT_EQ(tuned.nccl_rules[0].channels, 8);
  EXPECT_NE(space.describe().find("NCCL"), std::string::npos);
}

TEST(SearchSpace, NcclSocketsIsOneInstanceKnobOfThreadsTimesSocketsNotSearchedByDefault) {
  const size_t knob = knob_index("nccl_sockets");
  const auto& row = knobs()[knob];
  EXPECT_EQ(row.option, "nccl-sockets");
  EXPECT_EQ(row.pin_variable, "ACSPEED_NCCL_SOCKETS");
  EXPECT_TRUE(row.needs_gpu);
  EXPECT_TRUE(row.before_communicator);
  EXPECT_FALSE(row.switchable);  // NCCL reads them once per process: never online
  SearchSpace space;
  EXPECT_EQ(space.dims()[knob], 1u);
  EXPECT_EQ(space.describe(), "bucket 25 MiB x allreduce x streams 1 x compression none = 1 config");
  EXPECT_EQ(nlohmann::json(space)["nccl_sockets"], nlohmann::json::array({"0"}));

  space.nccl_sockets = parse_nccl_sockets_list("--nccl-sockets", "0,2x4,16x4");
  ASSERT_EQ(space.size(), 3u);
  EXPECT_NE(space.describe().find("x NCCL sockets 0,2x4,16x4 = 3 configs"), std::string::npos) << space.describe();
  EXPECT_EQ(nlohmann::json(space)["nccl_sockets"], nlohmann::json::array({"0", "2x4", "16x4"}));
  const Point start = space.default_point();
  EXPECT_EQ(start[knob], 0u);
  EXPECT_TRUE(space.config_at(start).is_default());  // 0: NCCL's choice, nothing set
  Point two_by_four = start;
  two_by_four[knob] = 1;
  const CommConfig c = space.config_at(two_by_four);
  ASSERT_TRUE(c.nccl_sockets.has_value());
  EXPECT_EQ(c.nccl_sockets->threads, 2);
  EXPECT_EQ(c.nccl_sockets->per_thread, 4);
  EXPECT_TRUE(c.nccl_rules.empty());  // no plugin rule: NCCL reads these from its environment
  EXPECT_FALSE(c.needs_comm_hook());
  EXPECT_EQ(c.describe(), "allreduce, NCCL sockets 2x4");

  // NCCL's limits (net_socket.cc: MAX_THREADS 16, MAX_SOCKETS 64) are refused by name, not lowered.
  for (const char* bad : {"16x8", "17x1", "0x4", "2x0", "2x", "x4", "2*4", "auto", "2x4,2x04", "-1x2"}) {
    EXPECT_FALSE(error_of([&] { parse_nccl_sockets_list("--nccl-sockets", bad); }).empty()) << bad;
  }
  EXPECT_EQ(error_of([] { parse_nccl_sockets_list("--nccl-sockets", "0,16x8"); }),
            "--nccl-sockets '16x8' is out of range (accepted: '0' for NCCL's choice, or THREADSxSOCKETS such as 2x4: "
            "threads 1 to 16, sockets per thread 1 to 64, threads x sockets at most 64)");
}

TEST(SearchSpace, NcclSocketsArePinnedThroughTheEnvironmentLikeTheOtherKnobs) {
  {
    ScopedEnv pin("ACSPEED_NCCL_SOCKETS", "4x2");
    SearchSpace space;
    space.nccl_sockets = parse_nccl_sockets_list("--nccl-sockets", "0,1x1,2x4");
    apply_pins(space);
    ASSERT_EQ(space.nccl_sockets.size(), 1u);
    EXPECT_EQ(to_string(space.nccl_sockets[0]), "4x2");
    EXPECT_EQ(space.pinned, (std::vector<std::string>{"nccl_sockets (ACSPEED_NCCL_SOCKETS)"}));
  }
  {
    ScopedEnv pin("ACSPEED_NCCL_SOCKETS", "0");  // NCCL's choice, not searched
    SearchSpace space;
    space.nccl_sockets = parse_nccl_sockets_list("--nccl-sockets", "0,2x4");
    apply_pins(space);
    EXPECT_EQ(space.nccl_sockets, (std::vector<std::optional<NcclSockets>>{std::nullopt}));
  }
  ScopedEnv bad("ACSPEED_NCCL_SOCKETS", "8x16");
  SearchSpace space;
  EXPECT_NE(error_of([&] { apply_pins(space); }).find("ACSPEED_NCCL_SOCKETS '8x16' is out of range"),
            std::string::npos);
}

TEST(SearchSpace, GradAsBucketViewIsAKnobThatADefaultSpaceDoesNotSearch) {
  SearchSpace space;  // the knob left at its default: the space and its configs are what they were
  const auto& names = SearchSpace::knob_names();
  const size_t knob = static_cast<size_t>(std::find(names.begin(), names.end(), "gradient_as_bucket_view") -
                                          names.begin());
  ASSERT_LT(knob, names.size());
  EXPECT_EQ(space.dims()[knob], 1u);
  EXPECT_EQ(space.size(), 1u);
  EXPECT_TRUE(space.config_at(space.default_point()).is_default());
  EXPECT_EQ(space.describe(), "bucket 25 MiB x allreduce x streams 1 x compression none = 1 config");
  EXPECT_EQ(nlohmann::json(space)["gradient_as_bucket_view"], nlohmann::json::array({false}));

  space.streams = {1, 2};
  space.grad_as_bucket_view = parse_bool_list("--grad-as-bucket-view", "false,true");
  EXPECT_EQ(space.size(), 4u);
  EXPECT_NE(space.describe().find("x streams 1,2 x compression none x grad-as-bucket-view false,true = 4 configs"),
            std::string::npos)
      << space.describe();
  const Point start = space.default_point();
  EXPECT_EQ(start[knob], 0u);  // false: DDP's own
  EXPECT_FALSE(space.config_at(start).gradient_as_bucket_view);  // left unset, not an explicit false
  Point view = start;
  view[knob] = 1;
  EXPECT_EQ(space.config_at(view).gradient_as_bucket_view, std::optional<bool>(true));
  EXPECT_EQ(space.config_at(view).describe(), "gradient_as_bucket_view=true, allreduce");
  EXPECT_NE(error_of([] { parse_bool_list("--grad-as-bucket-view", "false,maybe"); }).find("'maybe'"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_bool_list("--grad-as-bucket-view", "true,1"); }).find("one value twice"),
            std::string::npos);
}

TEST(Knobs, EveryKnobHasOneNameOneOptionAndADefaultThatIsDdps) {
  std::set<std::string> names, options;
  SearchSpace space;
  CommConfig config;
  for (const auto& knob : knobs()) {
    EXPECT_TRUE(names.insert(knob.name).second) << knob.name;
    EXPECT_TRUE(options.insert(knob.option).second) << knob.option;
    EXPECT_FALSE(knob.help().empty()) << knob.name;
    EXPECT_TRUE(knob.pin) << knob.name << ": every knob can be held at a config's value (a pin, a job's own)";
    EXPECT_EQ(knob.count(space), 1u) << knob.name;
    knob.apply(space, knob.default_index(space), config);
  }
  ASSERT_EQ(SearchSpace::knob_names().size(), knobs().size());
  for (size_t i = 0; i < knobs().size(); ++i) EXPECT_EQ(SearchSpace::knob_names()[i], knobs()[i].name);
  EXPECT_TRUE(config.is_default()) << config.describe();
}

TEST(Knobs, PinningEveryKnobToAConfigGivesThatConfigBack) {
  CommConfig config;
  config.bucket_cap_mb = 50;
  config.gradient_as_bucket_view = true;
  config.algorithm = Algorithm::kReduceScatter;
  config.streams = 2;
  config.compression = Compression::kFp16;
  NcclRule rule;
  rule.collective = "any";
  rule.algorithm = "ring";
  rule.protocol = "ll";
  rule.channels = 4;
  config.nccl_rules = {rule};
  config.nccl_sockets = NcclSockets{2, 4};
  SearchSpace space;
  space.bucket_mb = {5, 25};
  space.streams = {1, 2, 4};
  for (const auto& knob : knobs()) {
    knob.pin(space, config);
    EXPECT_EQ(knob.count(space), 1u) << knob.name;
  }
  EXPECT_EQ(space.config_at(space.default_point()), config) << space.config_at(space.default_point()).describe();
}

TEST(SearchSpace, DefaultPointIsNearestToDdpDefaults) {
  SearchSpace space;
  space.bucket_mb = {1, 10, 100};
  space.streams = {2, 4};
  const Point d = space.default_point();
  EXPECT_EQ(space.bucket_mb[d[0]], 10.0);  // nearest to 25 MiB on a log scale
  EXPECT_EQ(space.streams[d[2]], 2);       // 1 stream not in the space: the first value
}

TEST(SearchSpace, EnvironmentPinsAreNotSearched) {
  ScopedEnv bucket("ACSPEED_BUCKET_MB", "8");
  ScopedEnv streams("ACSPEED_STREAMS", "2");
  SearchSpace space;
  space.bucket_mb = {1, 5, 25};
  space.streams = {1, 2, 4};
  space.algorithms = {Algorithm::kAllreduce, Algorithm::kReduceScatter};
  apply_pins(space);
  EXPECT_EQ(space.bucket_mb, (std::vector<double>{8}));
  EXPECT_EQ(space.streams, (std::vector<int>{2}));
  EXPECT_EQ(space.algorithms.size(), 2u);
  EXPECT_EQ(space.pinned.size(), 2u);
  EXPECT_EQ(space.size(), 2u);
}

TEST(SearchSpace, BadPinIsAnError) {
  ScopedEnv streams("ACSPEED_STREAMS", "abc");
  SearchSpace space;
  EXPECT_THROW(apply_pins(space), InvalidArgument);
}

}  // namespace
}  // namespace acspeed::tuner
