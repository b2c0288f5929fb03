// acspeed-tune configs list|show|delete|activate|export|import: the decision history in the store.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "acspeed/decision_io.h"
#include "acspeed/error.h"
#include "acspeed/report/report.h"
#include "cli.h"
#include "table.h"

namespace acspeed::cli {
namespace {

std::string speedup_text(const Decision& d) {
  if (!d.speedup) return "-";
  if (d.ci_low && d.ci_high) return fmt::format("{:.2f}x [{:.2f}, {:.2f}]", *d.speedup, *d.ci_low, *d.ci_high);
  return fmt::format("{:.2f}x", *d.speedup);
}

// The config for people; a stored config that is not valid says so (it is never applied).
std::string config_text(const Decision& d) {
  return d.config_error.empty() ? d.config.describe() : "INVALID (see `configs show`)";
}

// The world size; a decision tuned with ranks sharing GPUs says so (it serves only such jobs).
std::string world_text(const DecisionKey& key) {
  return key.gpus_shared ? fmt::format("{} (GPUs shared)", key.world_size) : std::to_string(key.world_size);
}

// KIND says where each decision came from (decision_kind: offline, online, imported); an online
// decision stored inactive beside an active offline one is listed like any other.
void print_decisions(const Store& store, const std::vector<Decision>& decisions) {
  Table table({"ID", "ACTIVE", "KIND", "INSTANCE TYPE", "MODEL", "PRECISION", "WORLD", "NODES", "CONFIG",
               "SPEEDUP [95% CI]", "CREATED (UTC)"});
  for (const auto& d : decisions) {
    table.add({std::to_string(d.id), d.active ? "*" : "", std::string(decision_kind(store, d)), d.key.instance_type,
               d.model_name.empty() ? d.key.model_signature : d.model_name, d.key.precision,
               world_text(d.key), std::to_string(d.key.nnodes), config_text(d),
               speedup_text(d), d.created_at});
  }
  table.print();
}

// The decisions document (decision_io.h) with each decision's kind beside it; `configs import`
// ignores the kind (a decision it imports has no session: it is "imported" there).
std::string decisions_document(const Store& store, const std::vector<Decision>& decisions) {
  nlohmann::json document = nlohmann::json::parse(decisions_to_json(decisions));
  for (size_t i = 0; i < decisions.size(); ++i) {
    document["decisions"][i]["kind"] = decision_kind(store, decisions[i]);
  }
  return document.dump(2);
}

DecisionFilter filter_from(const po::variables_map& vm) {
  DecisionFilter filter;
  if (vm.count("instance")) filter.instance_type = vm["instance"].as<std::string>();
  if (vm.count("model")) filter.model = vm["model"].as<std::string>();
  filter.active_only = vm.count("active") > 0;
  return filter;
}

Decision require_decision(const Store& store, int64_t id) {
  auto d = store.decision(id);
  if (!d) ACS_THROW(InvalidArgument, "no decision {} in store {}: {}", id, store.path(), give_id(kDecisionIds));
  return *d;
}

}  // namespace

int cmd_configs(const GlobalOptions& global, const std::vector<std::string>& args) {
  const std::string usage =
      "acspeed-tune configs list [--instance KEY] [--model NAME] [--active] [--json]\n"
      "       acspeed-tune configs show ID [--json]\n"
      "       acspeed-tune configs delete ID\n"
      "       acspeed-tune configs activate ID\n"
      "       acspeed-tune configs export [-o FILE [--force]] [--instance KEY] [--model NAME] [--active]\n"
      "       acspeed-tune configs import FILE";
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    fmt::print("usage: {}\n", usage);
    return args.empty() ? kExitUsage : kExitOk;
  }
  const std::string action = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  po::options_description options("configs options");
  po::positional_options_description positional;
  po::variables_map vm;

  if (action == "list" || action == "export") {
    options.add_options()("instance", po::value<std::string>(), "only this instance type")(
        "model", po::value<std::string>(), "only this model name or signature")(
        "active", "only active decisions");
    if (action == "list") options.add_options()("json", "print the decisions document instead of a table");
    if (action == "export") {
      options.add_options()("output,o", po::value<std::string>(), "write to FILE instead of standard output")(
          "force", "overwrite an existing FILE");
    }
    if (!parse_args(usage, options, positional, rest, vm)) return kExitOk;
    auto store = open_store(global, false);
    const auto decisions = store->decisions(filter_from(vm));
    if (action == "list" && !vm.count("json")) {
      if (decisions.empty()) {
        fmt::print("no decisions stored in {}{}\n", store->path(), store->exists() ? "" : " (the store does not exist yet)");
      } else {
        print_decisions(*store, decisions);
      }
      return kExitOk;
    }
    const std::string document = decisions_document(*store, decisions) + "\n";
    if (!vm.count("output")) {
      fmt::print("{}", document);
      return kExitOk;
    }
    const std::string file = vm["output"].as<std::string>();
    if (std::filesystem::exists(file) && !vm.count("force")) {
      ACS_THROW(InvalidArgument, "{} exists; pass --force to overwrite it", file);
    }
    std::ofstream out(file, std::ios::trunc);
    out << document;
    if (!out) ACS_THROW(Error, "cannot write {}", file);
    fmt::print("exported {} decision(s) to {}\n", decisions.size(), file);
    return kExitOk;
  }

  if (action == "show" || action == "delete" || action == "activate") {
    options.add_options()("id", po::value<std::string>(), "decision ID (`acspeed-tune configs list`)");
    if (action == "show") options.add_options()("json", "print JSON");
    positional.add("id", 1);
    if (!parse_args(usage, options, positional, rest, vm)) return kExitOk;
    const int64_t id = required_id(vm, "id", "", kDecisionIds);
    auto store = open_store(global, action != "show");
    const Decision d = require_decision(*store, id);
    if (action == "show") {
      if (vm.count("json")) {
        fmt::print("{}\n", decisions_document(*store, {d}));
        return kExitOk;
      }
      print_decisions(*store, {d});
      const auto session = d.session_id ? store->session(*d.session_id) : std::nullopt;
      fmt::print("\nconfig: {}\ntuned under: {}; per-device batch {}\n",
                 d.config_error.empty() ? config_to_json(d.config, 2)
                                        : fmt::format("invalid, never applied ({}); delete it with `acspeed-tune "
                                                      "configs delete {}`", d.config_error, d.id),
                 describe(report::tuned_versions(d, session ? session->versions_json : "")), d.batch_size);
      if (!d.note.empty()) fmt::print("note: {}\n", d.note);
      return kExitOk;
    }
    if (action == "delete") {
      store->remove_decision(id);
      fmt::print("deleted decision {} ({}, {})\n", id, d.key.instance_type, d.model_name);
    } else {
      store->activate(id);
      fmt::print("decision {} is now active for {} / {} / {} / world {} / {} node(s)\n", id, d.key.instance_type,
                 d.model_name.empty() ? d.key.model_signature : d.model_name, d.key.precision, world_text(d.key),
                 d.key.nnodes);
    }
    return kExitOk;
  }

  if (action == "import") {
    options.add_options()("file", po::value<std::string>()->required(), "decisions document to import");
    positional.add("file", 1);
    if (!parse_args(usage, options, positional, rest, vm)) return kExitOk;
    const std::string file = vm["file"].as<std::string>();
    std::ifstream in(file);
    if (!in) ACS_THROW(InvalidArgument, "cannot read {}", file);
    std::stringstream text;
    text << in.rdbuf();
    std::vector<Decision> decisions;
    try {
      decisions = decisions_from_json(text.str());
    } catch (const InvalidArgument& e) {
      ACS_THROW(InvalidArgument, "{}: {}", file, e.what());
    }
    auto store = open_store(global, true);
    for (auto& d : decisions) {
      d.session_id.reset();  // sessions are not carried between stores
      const int64_t id = store->add_decision(d, d.active);
      fmt::print("imported decision {} as {}{}\n", d.id, id, d.active ? " (active)" : "");
    }
    return kExitOk;
  }
  ACS_THROW(InvalidArgument, "configs action '{}' is not one of list, show, delete, activate, export, import", action);
}

}  // namespace acspeed::cli
