// make_report_fixture DB [--model NAME] [--instance KEY] [--error TEXT] [--no-decision] [--no-metrics] [--online]
// Writes one sample tuning session (report_fixture.h) into the store DB through the Store API and
// prints its id; with --online, a sample online session (add_sample_online_session) instead. The pytest suite uses it to get a store to report on without running a tuning.
#include <iostream>

#include <boost/program_options.hpp>

#include "acspeed/store.h"
#include "report_fixture.h"

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  acspeed::testing::SampleSessionOptions sample;
  po::options_description options("make_report_fixture");
  options.add_options()("db", po::value<std::string>()->required(), "store to write")(
      "model", po::value(&sample.model_name), "model name")("instance", po::value(&sample.instance_type),
                                                             "instance type")(
      "error", po::value(&sample.error_text), "error text of the failed trial")("no-decision", "no decision")(
      "no-metrics", "no probe metrics")("online", "an online session (tuned inside a job) instead");
  po::positional_options_description positional;
  positional.add("db", 1);
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(options).positional(positional).run(), vm);
    po::notify(vm);
    sample.with_decision = vm.count("no-decision") == 0;
    sample.with_metrics = vm.count("no-metrics") == 0;
    acspeed::StoreOptions store_options;
    store_options.path = vm["db"].as<std::string>();
    auto store = acspeed::Store::open(store_options);
    if (vm.count("online")) {
      acspeed::testing::SampleOnlineOptions online;
      if (vm.count("model")) online.model_name = sample.model_name;
      online.instance_type = sample.instance_type;
      std::cout << acspeed::testing::add_sample_online_session(*store, online).session_id << "\n";
    } else {
      std::cout << acspeed::testing::add_sample_session(*store, sample) << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "make_report_fixture: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
