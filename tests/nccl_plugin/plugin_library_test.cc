// libnccl-tuner-acspeed.so as NCCL sees it: dlopen the built library, find its symbols, drive
// init/getCollInfo/getChunkSize/finalize with fake cost tables and a fake logger, for each exported
// ABI version.
// Each test loads its own copy of the file, so every test starts from fresh plugin state.
#include <dlfcn.h>
#include <stdlib.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "acspeed/config.h"
#include "acspeed/nccl_tuner_plugin.h"
#include "elf_dynamic_info.h"
#include "fake_nccl.h"
#include "tuner_v3.h"
#include "tuner_v4.h"
#include "tuner_v5.h"
#include "tuner_v6.h"

namespace acspeed::testing {
namespace {

namespace fs = std::filesystem;

const char* const kPluginPath = ACSPEED_NCCL_PLUGIN_PATH;

fs::path make_temp_dir() {
  std::string pattern = (fs::temp_directory_path() / "acspeed-nccl-plugin-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return pattern;
}

// A private copy of the plugin, loaded as NCCL loads it (RTLD_NOW | RTLD_LOCAL), driven through
// the ABI `version` (6, 5, 4 or 3).
class LoadedPlugin {
 public:
  LoadedPlugin(int version, const fs::path& dir) : version_(version), path_(dir / ACSPEED_NCCL_TUNER_LIBRARY) {
    fs::create_directories(dir);
    fs::copy_file(kPluginPath, path_);
    handle_ = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) throw std::runtime_error(std::string("dlopen: ") + dlerror());
    v6_ = static_cast<const acs_nccl_tuner_v6_t*>(dlsym(handle_, "ncclTunerPlugin_v6"));
    v5_ = static_cast<const acs_nccl_tuner_v5_t*>(dlsym(handle_, "ncclTunerPlugin_v5"));
    v4_ = static_cast<const acs_nccl_tuner_v4_t*>(dlsym(handle_, "ncclTunerPlugin_v4"));
    v3_ = static_cast<const acs_nccl_tuner_v3_t*>(dlsym(handle_, "ncclTunerPlugin_v3"));
    set_rules_ = reinterpret_cast<int (*)(const char*)>(dlsym(handle_, "acspeed_nccl_tuner_set_rules"));
    if (!v6_ || !v5_ || !v4_ || !v3_ || !set_rules_) throw std::runtime_error("a plugin symbol is missing");
  }
  ~LoadedPlugin() { dlclose(handle_); }
  LoadedPlugin(const LoadedPlugin&) = delete;
  LoadedPlugin& operator=(const LoadedPlugin&) = delete;

  const char* name() const {
    return version_ == 6 ? v6_->name : version_ == 5 ? v5_->name : version_ == 4 ? v4_->name : v3_->name;
  }
  int version() const { return version_; }

  void* init(uint64_t comm_id = 0xC0FFEE, size_t n_ranks = 8, size_t n_nodes = 1) {
    void* context = nullptr;
    acs_nccl_result_t result;
    if (version_ == 6) {
      acs_nccl_nvl_domain_info_v6_t domains{1, 8, 8};
      acs_nccl_tuner_constants_v6_t constants{};
      result = v6_->init(&context, comm_id, n_ranks, n_nodes, fake_nccl_logger, &domains, &constants);
    } else if (version_ == 5) {
      acs_nccl_nvl_domain_info_v5_t domains{1, 8, 8};
      acs_nccl_tuner_constants_v5_t constants{};
      result = v5_->init(&context, comm_id, n_ranks, n_nodes, fake_nccl_logger, &domains, &constants);
    } else if (version_ == 4) {
      result = v4_->init(n_ranks, n_nodes, fake_nccl_logger, &context);
    } else {
      result = v3_->init(n_ranks, n_nodes, fake_nccl_logger, &context);
    }
    EXPECT_EQ(result, acs_nccl_success);
    return context;
  }

  acs_nccl_result_t get_coll_info_raw(void* context, float** table, int num_algo, int num_proto,
                                      int* channels) {
    const auto f = acs_nccl_func_all_reduce;
    if (version_ == 6) return v6_->get_coll_info(context, f, 4096, 1, table, num_algo, num_proto, 0, channels);
    if (version_ == 5) return v5_->get_coll_info(context, f, 4096, 1, table, num_algo, num_proto, 0, channels);
    if (version_ == 4) return v4_->get_coll_info(context, f, 4096, 1, table, num_algo, num_proto, 0, channels);
    return v3_->get_coll_info(context, f, 4096, 1, table, num_algo, num_proto, channels);
  }

  // Returns the nChannels output; NCCL starts it at 0.
  int get_coll_info(void* context, acs_nccl_func_t collective, size_t bytes, CostTable& table) {
    int channels = 0;
    acs_nccl_result_t result;
    if (version_ == 6) {
      result = v6_->get_coll_info(context, collective, bytes, 1, table.as_nccl_argument(), 7, 3, 0, &channels);
    } else if (version_ == 5) {
      result = v5_->get_coll_info(context, collective, bytes, 1, table.as_nccl_argument(), 7, 3, 0, &channels);
    } else if (version_ == 4) {
      result = v4_->get_coll_info(context, collective, bytes, 1, table.as_nccl_argument(), 7, 3, 0, &channels);
    } else {
      result = v3_->get_coll_info(context, collective, bytes, 1, table.as_nccl_argument(), 7, 3, &channels);
    }
    EXPECT_EQ(result, acs_nccl_success);
    return channels;
  }

  acs_nccl_result_t finalize_raw(void* context) {
    if (version_ == 6) return v6_->finalize(context);
    return version_ == 5 ? v5_->finalize(context) : version_ == 4 ? v4_->destroy(context) : v3_->destroy(context);
  }

  // NCCL 2.30's call after it chose (algorithm, protocol, channels): `nccl_chunk` is what NCCL
  // computed and passes in; returns what the plugin left there. Only v6 has the callback.
  size_t get_chunk_size(void* context, acs_nccl_func_t collective, size_t bytes, int algorithm, int protocol,
                        size_t nccl_chunk) {
    EXPECT_EQ(version_, 6) << "getChunkSize is a v6 callback";
    size_t chunk = nccl_chunk;
    EXPECT_EQ(v6_->get_chunk_size(context, collective, bytes, algorithm, protocol, 8, &chunk), acs_nccl_success);
    return chunk;
  }
  acs_nccl_result_t get_chunk_size_raw(void* context, size_t* chunk) {
    return v6_->get_chunk_size(context, acs_nccl_func_all_reduce, 4096, ACS_NCCL_ALGO_RING, ACS_NCCL_PROTO_SIMPLE,
                               8, chunk);
  }
  void finalize(void* context) { EXPECT_EQ(finalize_raw(context), acs_nccl_success); }

  int set_rules(const char* config_json) { return set_rules_(config_json); }

 private:
  int version_;
  fs::path path_;
  void* handle_ = nullptr;
  const acs_nccl_tuner_v6_t* v6_ = nullptr;
  const acs_nccl_tuner_v5_t* v5_ = nullptr;
  const acs_nccl_tuner_v4_t* v4_ = nullptr;
  const acs_nccl_tuner_v3_t* v3_ = nullptr;
  int (*set_rules_)(const char*) = nullptr;
};

NcclRule make_rule(std::string collective, int64_t min_bytes, int64_t max_bytes, std::string algorithm,
                   std::string protocol, int channels, std::optional<int64_t> chunk_bytes = std::nullopt) {
  NcclRule rule;
  rule.collective = std::move(collective);
  rule.min_bytes = min_bytes;
  rule.max_bytes = max_bytes;
  rule.algorithm = std::move(algorithm);
  rule.protocol = std::move(protocol);
  rule.channels = channels;
  rule.chunk_bytes = chunk_bytes;
  return rule;
}

std::string config_with(std::vector<NcclRule> rules) {
  CommConfig config;
  config.nccl_rules = std::move(rules);
  return config_to_json(config);
}

// Allreduce below 1 MiB: ring/LL128 on 4 channels.
std::string ring_ll128_config() {
  return config_with({make_rule("allreduce", 0, 1 << 20, "ring", "ll128", 4)});
}

class PluginAbi : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir();
    unsetenv("ACSPEED_NCCL_RULES");
    clear_log();
    plugin_ = std::make_unique<LoadedPlugin>(GetParam(), dir_);
  }
  void TearDown() override {
    plugin_.reset();
    unsetenv("ACSPEED_NCCL_RULES");
    fs::remove_all(dir_);
  }
  std::string write_rules_file(const std::string& text) {
    const auto path = (dir_ / "rules.json").string();
    std::ofstream(path) << text;
    return path;
  }
  void use_rules_file(const std::string& text) {
    setenv("ACSPEED_NCCL_RULES", write_rules_file(text).c_str(), 1);
  }

  fs::path dir_;
  std::unique_ptr<LoadedPlugin> plugin_;
};

TEST_P(PluginAbi, NameIsAcspeed) { EXPECT_STREQ(plugin_->name(), "acspeed"); }

TEST_P(PluginAbi, MatchingRuleMakesNcclPickItsChoiceAndSetsChannels) {
  use_rules_file(ring_ll128_config());
  void* context = plugin_->init();
  CostTable table = typical_allreduce_table();
  EXPECT_EQ(plugin_->get_coll_info(context, acs_nccl_func_all_reduce, 4096, table), 4);
  EXPECT_EQ(nccl_pick(table), std::make_pair(ACS_NCCL_ALGO_RING, ACS_NCCL_PROTO_LL128));
  // Ignored entries are still ignored.
  EXPECT_EQ(table.cells[ACS_NCCL_ALGO_PAT][ACS_NCCL_PROTO_SIMPLE], ACS_NCCL_ALGO_PROTO_IGNORE);
  EXPECT_EQ(table.cells[ACS_NCCL_ALGO_COLLNET_DIRECT][ACS_NCCL_PROTO_LL], ACS_NCCL_ALGO_PROTO_IGNORE);
  // The first use of the rule is logged once, at INFO.
  CostTable again = typical_allreduce_table();
  plugin_->get_coll_info(context, acs_nccl_func_all_reduce, 8192, again);
  EXPECT_EQ(count_logged(acs_nccl_log_info, "rule 0 (allreduce [0, 1048576) -> ring/ll128, 4 channels) first applied"), 1u);
  EXPECT_EQ(count_logged(acs_nccl_log_warn, "TUNER/acspeed"), 0u);
  plugin_->finalize(context);
}

TEST_P(PluginAbi, NoMatchingRuleLeavesTableByteIdenticalAndChannelsZero) {
  use_rules_file(ring_ll128_config());
  void* context = plugin_->init();
  for (const auto& [collective, bytes] : std::vector<std::pair<acs_nccl_func_t, size_t>>{
           {acs_nccl_func_all_reduce, size_t{1} << 20},   // max_bytes is exclusive
           {acs_nccl_func_all_gather, 4096},              // another collective
           {acs_nccl_func_all_reduce, size_t{1} << 40}}) {
    CostTable table = typical_allreduce_table();
    EXPECT_EQ(plugin_->get_coll_info(context, collective, bytes, table), 0) << bytes;
    EXPECT_EQ(table, typical_allreduce_table()) << bytes;
  }
  plugin_->finalize(context);
}

TEST_P(PluginAbi, BadRulesFileSucceedsLogsOnceAndLeavesTable) {
  const std::vector<std::string> bad_files = {
      "{not json", R"({"version": 1, "nccl_rules": [{"algorithm": "butterfly"}]})", R"({"version": 99})"};
  for (size_t i = 0; i < bad_files.size(); ++i) {
    const std::string& bad = bad_files[i];
    plugin_.reset();  // fresh plugin state for each bad file
    clear_log();
    plugin_ = std::make_unique<LoadedPlugin>(GetParam(), dir_ / ("copy" + std::to_string(i)));
    use_rules_file(bad);
    void* first = plugin_->init();
    void* second = plugin_->init(0xBEEF);
    for (int call = 0; call < 3; ++call) {
      CostTable table = typical_allreduce_table();
      EXPECT_EQ(plugin_->get_coll_info(first, acs_nccl_func_all_reduce, 4096, table), 0) << bad;
      EXPECT_EQ(table, typical_allreduce_table()) << bad;
    }
    EXPECT_EQ(count_logged(acs_nccl_log_warn, "TUNER/acspeed: rules file '"), 1u) << bad;
    EXPECT_EQ(count_logged(acs_nccl_log_warn, "TUNER/acspeed"), 1u) << bad;
    plugin_->finalize(first);
    plugin_->finalize(second);
  }
}

TEST_P(PluginAbi, MissingOrRelativeRulesPathMeansNoRules) {
  setenv("ACSPEED_NCCL_RULES", (dir_ / "does-not-exist.json").c_str(), 1);
  void* context = plugin_->init();
  CostTable table = typical_allreduce_table();
  EXPECT_EQ(plugin_->get_coll_info(context, acs_nccl_func_all_reduce, 4096, table), 0);
  EXPECT_EQ(table, typical_allreduce_table());
  EXPECT_EQ(count_logged(acs_nccl_log_warn, "does-not-exist.json' rejected: cannot open it"), 1u);
  plugin_->finalize(context);

  LoadedPlugin fresh(GetParam(), dir_ / "fresh");
  clear_log();
  write_rules_file(ring_ll128_config());
  setenv("ACSPEED_NCCL_RULES", "rules.json", 1);  // relative to whatever the cwd is: refused
  void* other = fresh.init();
  CostTable untouched = typical_allreduce_table();
  EXPECT_EQ(fresh.get_coll_info(other, acs_nccl_func_all_reduce, 4096, untouched), 0);
  EXPECT_EQ(untouched, typical_allreduce_table());
  EXPECT_EQ(count_logged(acs_nccl_log_warn, "ACSPEED_NCCL_RULES='rules.json' is not an absolute path"), 1u);
  fresh.finalize(other);
}

TEST_P(PluginAbi, UnsetRulesVariableMeansNoRulesAndNoWarning) {
  void* context = plugin_->init();
  CostTable table = typical_allreduce_table();
  EXPECT_EQ(plugin_->get_coll_info(context, acs_nccl_func_all_reduce, 4096, table), 0);
  EXPECT_EQ(table, typical_allreduce_table());
  EXPECT_EQ(count_logged(acs_nccl_log_warn, "TUNER/acspeed"), 0u);
  EXPECT_EQ(count_logged(acs_nccl_log_info, "ACSPEED_NCCL_RULES is not set"), 1u);
  plugin_->finalize(context);
}

TEST_P(PluginAbi, SetterReplacesRulesForExistingAndNewCommunicators) {
  use_rules_file(ring_ll128_config());
  void* early = plugin_->init(0x1);
  ASSERT_EQ(plugin_->set_rules(config_with({make_rule("any", 0, 1 << 30, "tree", "simple", 0)}).c_str()),
            ACSPEED_NCCL_TUNER_OK);
  void* late = plugin_->init(0x2);  // the file is not read again: the setter's rules stay
  for (void* context : {early, late}) {
    CostTable table = typical_allreduce_table();
    EXPECT_EQ(plugin_->get_coll_info(context, acs_nccl_func_all_reduce, 4096, table), 0);
    EXPECT_EQ(nccl_pick(table), std::make_pair(ACS_NCCL_ALGO_TREE, ACS_NCCL_PROTO_SIMPLE));
  }
  // A config without rules clears them.
  ASSERT_EQ(plugin_->set_rules(R"({"version": 1})"), ACSPEED_NCCL_TUNER_OK);
  CostTable table = typical_allreduce_table();
  EXPECT_EQ(plugin_->get_coll_info(early, acs_nccl_func_all_reduce, 4096, table), 0);
  EXPECT_EQ(table, typical_allreduce_table());
  plugin_->finalize(early);
  plugin_->finalize(late);
}

TEST_P(PluginAbi, SetterBeforeAnyCommunicatorWinsOverTheFile) {
  use_rules_file(ring_ll128_config());
  ASSERT_EQ(plugin_->set_rules(config_with({make_rule("allreduce", 0, 1 << 20, "tree", "ll", 2)}).c_str()),
            ACSPEED_NCCL_TUNER_OK);
  void* context = plugin_->init();
  CostTable table = typical_allreduce_table();
  EXPECT_EQ(plugin_->get_coll_info(context, acs_nccl_func_all_reduce, 4096, table), 2);
  EXPECT_EQ(nccl_pick(table), std::make_pair(ACS_NCCL_ALGO_TREE, ACS_NCCL_PROTO_LL));
  plugin_->finalize(context);
}

TEST_P(PluginAbi, SetterRefusesBadConfigKeepsRulesAndSaysWhy) {
  use_rules_file(ring_ll128_config());
  void* context = plugin_->init();
  EXPECT_EQ(plugin_->set_rules(nullptr), ACSPEED_NCCL_TUNER_INVALID_CONFIG);
  EXPECT_EQ(plugin_->set_rules("[1, 2"), ACSPEED_NCCL_TUNER_INVALID_CONFIG);
  EXPECT_EQ(plugin_->set_rules(R"({"version": 1, "nccl_rules": [{"channels": 65}]})"),
            ACSPEED_NCCL_TUNER_INVALID_CONFIG);
  EXPECT_EQ(count_logged(acs_nccl_log_warn, "acspeed_nccl_tuner_set_rules"), 3u);
  EXPECT_EQ(count_logged(acs_nccl_log_warn, "channels 65 is out of range"), 1u);
  CostTable table = typical_allreduce_table();
  EXPECT_EQ(plugin_->get_coll_info(context, acs_nccl_func_all_reduce, 4096, table), 4);
  EXPECT_EQ(nccl_pick(table), std::make_pair(ACS_NCCL_ALGO_RING, ACS_NCCL_PROTO_LL128));
  plugin_->finalize(context);
}

TEST_P(PluginAbi, RuleNcclCannotHonourKeepsNcclsChoiceButSetsChannels) {
  use_rules_file(config_with({make_rule("allreduce", 0, 1 << 20, "pat", "any", 3)}));
  void* context = plugin_->init();
  for (int i = 0; i < 3; ++i) {
    CostTable table = typical_allreduce_table();
    EXPECT_EQ(plugin_->get_coll_info(context, acs_nccl_func_all_reduce, 4096, table), 3);
    EXPECT_EQ(table, typical_allreduce_table());
  }
  EXPECT_EQ(count_logged(acs_nccl_log_info, "NCCL offers none of its algorithm/protocol"), 1u);
  plugin_->finalize(context);
}

TEST_P(PluginAbi, UnusableArgumentsAreSurvivedAndLoggedOnce) {
  use_rules_file(ring_ll128_config());
  void* context = plugin_->init();
  // NCCL never passes these; the plugin must still return success and leave NCCL's choice.
  CostTable table = typical_allreduce_table();
  int channels = 7;
  EXPECT_EQ(plugin_->get_coll_info_raw(context, nullptr, 7, 3, &channels), acs_nccl_success);
  EXPECT_EQ(channels, 0);
  channels = 7;
  EXPECT_EQ(plugin_->get_coll_info_raw(context, table.as_nccl_argument(), 0, 3, &channels), acs_nccl_success);
  EXPECT_EQ(channels, 0);
  EXPECT_EQ(plugin_->get_coll_info_raw(context, table.as_nccl_argument(), 7, 3, nullptr), acs_nccl_success);
  EXPECT_EQ(table, typical_allreduce_table());
  EXPECT_EQ(count_logged(acs_nccl_log_warn, "getCollInfo without a usable cost table"), 1u);
  // A null context (an init that could not allocate one) still gets the rules.
  EXPECT_EQ(plugin_->get_coll_info(nullptr, acs_nccl_func_all_reduce, 4096, table), 4);
  EXPECT_EQ(plugin_->finalize_raw(nullptr), acs_nccl_success);
  plugin_->finalize(context);
}

TEST_P(PluginAbi, ConcurrentCallsSeeEitherWholeRuleSet) {
  const std::string a = config_with({make_rule("any", 0, INT64_MAX, "ring", "ll128", 2)});
  const std::string b = config_with({make_rule("any", 0, INT64_MAX, "tree", "simple", 6)});
  ASSERT_EQ(plugin_->set_rules(a.c_str()), ACSPEED_NCCL_TUNER_OK);
  void* context = plugin_->init();
  std::atomic<bool> stop{false};
  std::atomic<int> inconsistent{0};
  std::atomic<int> calls{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 3; ++t) {
    callers.emplace_back([&] {
      while (!stop.load()) {
        CostTable table = typical_allreduce_table();
        const int channels = plugin_->get_coll_info(context, acs_nccl_func_all_reduce, 4096, table);
        const auto pick = nccl_pick(table);
        const bool is_a = pick == std::make_pair(ACS_NCCL_ALGO_RING, ACS_NCCL_PROTO_LL128) && channels == 2;
        const bool is_b = pick == std::make_pair(ACS_NCCL_ALGO_TREE, ACS_NCCL_PROTO_SIMPLE) && channels == 6;
        if (!is_a && !is_b) inconsistent.fetch_add(1);
        calls.fetch_add(1);
      }
    });
  }
  // At least 300 swaps, and on until the callers have made 300 calls: a loaded machine may not
  // schedule them before the first 300 swaps are over.
  for (int i = 0; i < 300 || calls.load() < 300; ++i) {
    ASSERT_EQ(plugin_->set_rules((i % 2 ? a : b).c_str()), ACSPEED_NCCL_TUNER_OK);
    if (i % 16 == 0) std::this_thread::yield();
  }
  stop = true;
  for (auto& caller : callers) caller.join();
  EXPECT_EQ(inconsistent.load(), 0);
  EXPECT_GE(calls.load(), 300);
  plugin_->finalize(context);
}

// Allreduce below 1 MiB: ring/Simple, 8 channels, 256 KiB chunks; above it, NCCL's algorithm with 4 channels.
std::string chunk_config() {
  return config_with({make_rule("allreduce", 0, 1 << 20, "ring", "simple", 8, 262144),
                      make_rule("allreduce", 1 << 20, INT64_MAX, "any", "any", 4)});
}

TEST_P(PluginAbi, ChunkRuleSetsNcclsChunkUnderV6AndIsIgnoredOnceBelow) {
  use_rules_file(chunk_config());
  void* context = plugin_->init();
  for (int call = 0; call < 3; ++call) {
    CostTable table = typical_allreduce_table();
    // The rest of the rule applies whatever the ABI.
    EXPECT_EQ(plugin_->get_coll_info(context, acs_nccl_func_all_reduce, 4096, table), 8);
    EXPECT_EQ(nccl_pick(table), std::make_pair(ACS_NCCL_ALGO_RING, ACS_NCCL_PROTO_SIMPLE));
  }
  const std::string ignored = "no getChunkSize";
  if (plugin_->version() < 6) {
    // NCCL <= 2.29 never asks for a chunk size: one line says the rule's is ignored, nothing else warns.
    EXPECT_EQ(count_logged(acs_nccl_log_warn, "TUNER/acspeed: rule 0 (allreduce [0, 1048576) -> ring/simple, 8 "
                                              "channels, chunk 262144 B): this NCCL loaded tuner ABI v" +
                                                  std::to_string(plugin_->version())),
              1u);
    EXPECT_EQ(count_logged(acs_nccl_log_warn, ignored), 1u);
    EXPECT_EQ(count_logged(acs_nccl_log_warn, "TUNER/acspeed"), 1u);
    plugin_->finalize(context);
    return;
  }
  EXPECT_EQ(count_logged(acs_nccl_log_warn, "TUNER/acspeed"), 0u);
  const auto all_reduce = acs_nccl_func_all_reduce;
  // The matching rule's chunk replaces NCCL's, for the algorithm and protocol it asked for.
  EXPECT_EQ(plugin_->get_chunk_size(context, all_reduce, 4096, ACS_NCCL_ALGO_RING, ACS_NCCL_PROTO_SIMPLE, 131072),
            262144u);
  EXPECT_EQ(plugin_->get_chunk_size(context, all_reduce, 4096, ACS_NCCL_ALGO_RING, ACS_NCCL_PROTO_SIMPLE, 524288),
            262144u);
  EXPECT_EQ(count_logged(acs_nccl_log_info, "first set the chunk size of allreduce of 4096 bytes"), 1u);
  // NCCL running another algorithm or protocol than the rule's (it ruled them out): its chunk stays.
  EXPECT_EQ(plugin_->get_chunk_size(context, all_reduce, 4096, ACS_NCCL_ALGO_TREE, ACS_NCCL_PROTO_SIMPLE, 131072),
            131072u);
  EXPECT_EQ(plugin_->get_chunk_size(context, all_reduce, 4096, ACS_NCCL_ALGO_RING, ACS_NCCL_PROTO_LL, 65536), 65536u);
  // A matching rule without a chunk size, another collective, no rules at all: NCCL's chunk stays.
  EXPECT_EQ(plugin_->get_chunk_size(context, all_reduce, 1 << 22, ACS_NCCL_ALGO_RING, ACS_NCCL_PROTO_SIMPLE, 524288),
            524288u);
  EXPECT_EQ(plugin_->get_chunk_size(context, acs_nccl_func_all_gather, 4096, ACS_NCCL_ALGO_RING,
                                    ACS_NCCL_PROTO_SIMPLE, 131072),
            131072u);
  ASSERT_EQ(plugin_->set_rules(R"({"version": 2})"), ACSPEED_NCCL_TUNER_OK);
  EXPECT_EQ(plugin_->get_chunk_size(context, all_reduce, 4096, ACS_NCCL_ALGO_RING, ACS_NCCL_PROTO_SIMPLE, 131072),
            131072u);
  // A rule with "any" algorithm and protocol sets the chunk of whatever NCCL runs.
  ASSERT_EQ(plugin_->set_rules(config_with({make_rule("any", 0, INT64_MAX, "any", "any", 0, 65536)}).c_str()),
            ACSPEED_NCCL_TUNER_OK);
  EXPECT_EQ(plugin_->get_chunk_size(context, acs_nccl_func_reduce_scatter, 1 << 24, ACS_NCCL_ALGO_PAT,
                                    ACS_NCCL_PROTO_LL128, 1 << 20),
            65536u);
  // Survives what NCCL never passes; a null context (an init that could not allocate one) still gets the rules.
  EXPECT_EQ(plugin_->get_chunk_size_raw(context, nullptr), acs_nccl_success);
  size_t chunk = 131072;
  EXPECT_EQ(plugin_->get_chunk_size_raw(nullptr, &chunk), acs_nccl_success);
  EXPECT_EQ(chunk, 65536u);
  EXPECT_EQ(count_logged(acs_nccl_log_warn, "TUNER/acspeed"), 0u);
  plugin_->finalize(context);
}

INSTANTIATE_TEST_SUITE_P(Versions, PluginAbi, ::testing::Values(6, 5, 4, 3),
                         [](const ::testing::TestParamInfo<int>& info) { return "v" + std::to_string(info.param); });

TEST(PluginLibrary, ExportsExactlyThePluginSymbolsAndTheSetter) {
  const auto info = read_elf_dynamic_info(kPluginPath);
  EXPECT_EQ(info.exported, (std::set<std::string>{"ncclTunerPlugin_v6", "ncclTunerPlugin_v5", "ncclTunerPlugin_v4",
                                                  "ncclTunerPlugin_v3", "acspeed_nccl_tuner_set_rules"}));
  void* handle = dlopen(kPluginPath, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  for (const char* name : {"ncclTunerPlugin_v6", "ncclTunerPlugin_v5", "ncclTunerPlugin_v4", "ncclTunerPlugin_v3",
                           "acspeed_nccl_tuner_set_rules"}) {
    EXPECT_NE(dlsym(handle, name), nullptr) << name;
  }
  // Internal functions exist in the library (its local symbol table) but cannot be found.
  for (const char* name : {"_ZN7acspeed10nccl_tuner9set_rulesEPKc", "_ZN7acspeed10nccl_tuner8finalizeEPv",
                           "_ZN7acspeed16config_from_jsonESt17basic_string_viewIcSt11char_traitsIcEEPSt6vectorINSt7__cxx1112basic_stringIcS2_SaIcEEESaIS8_EE"}) {
    if (!info.symtab_defined.empty()) {
      EXPECT_EQ(info.symtab_defined.count(name), 1u) << name;
    }
    EXPECT_EQ(dlsym(handle, name), nullptr) << name;
  }
  EXPECT_EQ(dlsym(handle, "ncclTunerPlugin_v2"), nullptr) << "v2 is deliberately not exported";
  dlclose(handle);
}

TEST(PluginLibrary, HeaderListsExactlyTheExportedSymbols) {
  // The contract in nccl_tuner_plugin.h names what the library exports: it must be what it exports.
  std::ifstream in(ACSPEED_NCCL_PLUGIN_HEADER);
  ASSERT_TRUE(in) << ACSPEED_NCCL_PLUGIN_HEADER;
  std::stringstream text;
  text << in.rdbuf();
  const std::string header = text.str();
  const size_t from = header.find("Exported symbols");
  const size_t to = header.find("How the Python side uses it");
  ASSERT_NE(from, std::string::npos);
  ASSERT_NE(to, std::string::npos);
  const std::string section = header.substr(from, to - from);
  std::set<std::string> listed;
  const std::regex symbol(R"(\b(ncclTunerPlugin_v[0-9]+|acspeed_nccl_tuner_[a-z_]+)\b)");
  for (auto it = std::sregex_iterator(section.begin(), section.end(), symbol); it != std::sregex_iterator(); ++it) {
    listed.insert((*it)[1]);
  }
  EXPECT_EQ(listed, read_elf_dynamic_info(kPluginPath).exported) << section;
}

TEST(PluginLibrary, NeedsOnlyGlibcAndLibgccSoACopyRunsOnTheGpuMachine) {
  const auto info = read_elf_dynamic_info(kPluginPath);
  const std::set<std::string> allowed = {"libc.so.6", "libm.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2"};
  for (const auto& library : info.needed) EXPECT_EQ(allowed.count(library), 1u) << "needs " << library;
  // glibc 2.34 (RHEL 9, Ubuntu 22.04 has 2.35) is the oldest the carried copy must load on.
  for (const auto& version : info.version_needs) {
    if (version.rfind("GLIBC_2.", 0) != 0) continue;
    EXPECT_LE(std::stoi(version.substr(8)), 34) << "needs " << version;
  }
  EXPECT_EQ(info.version_needs.count("GLIBCXX_3.4"), 0u) << "libstdc++ must be linked in";
}

}  // namespace
}  // namespace acspeed::testing
