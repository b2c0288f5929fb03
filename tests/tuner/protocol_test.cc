#include "protocol.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "acspeed/error.h"

namespace acspeed::tuner {
namespace {

TEST(Protocol, TrialRequestRoundTripsWithItsConfig) {
  TrialRequest r;
  r.id = 7;
  r.config.bucket_cap_mb = 5;
  r.config.algorithm = Algorithm::kReduceScatter;
  r.config.streams = 2;
  r.warmup = 2;
  r.steps = 5;
  const std::string line = encode_trial(r);
  EXPECT_EQ(line.find('\n'), std::string::npos) << "one message = one line";
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j.at("v"), kProtocolVersion);
  EXPECT_EQ(j.at("type"), "trial");
  EXPECT_EQ(j.at("config").at("algorithm"), "reduce_scatter");
  const auto back = std::get<TrialRequest>(decode_tuner_message(line));
  EXPECT_EQ(back.id, 7);
  EXPECT_EQ(back.config, r.config);
  EXPECT_EQ(back.steps, 5);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(decode_tuner_message(encode_stop())));
}

TEST(Protocol, WorkerMessagesDecode) {
  WorkerHello h;
  h.world_size = 4;
  h.nnodes = 2;
  h.local_world_size = 2;
  h.backend = "gloo";
  h.device = "cpu";
  h.model = "tiny";
  h.model_signature = "p4-0123456789abcdef";
  h.param_count = 100;
  h.param_bytes = 400;
  h.torch_version = "2.15.0";
  h.batch_size = 8;
  h.precision = "fp32";
  const auto hello = std::get<WorkerHello>(decode_worker_message(encode_hello(h)));
  EXPECT_EQ(hello.world_size, 4);
  EXPECT_EQ(hello.model_signature, h.model_signature);
  EXPECT_EQ(hello.probe, "");
  EXPECT_EQ(hello.nccl_version, "");
  EXPECT_TRUE(hello.gradients.empty());  // a worker that does not say

  h.gradients.matrices = {{40, 24, 4, 1}};
  h.gradients.vectors = {{40, 4, 1}};
  const auto shaped = std::get<WorkerHello>(decode_worker_message(encode_hello(h)));
  ASSERT_EQ(shaped.gradients.matrices.size(), 1u);
  EXPECT_EQ(shaped.gradients.matrices[0].columns, 24);
  EXPECT_EQ(shaped.gradients.vectors[0].numel, 40);

  h.nccl_version = "2.21.5";  // torch's own NCCL, not the system library's
  h.cuda_version = "12.4";
  const auto gpu = std::get<WorkerHello>(decode_worker_message(encode_hello(h)));
  EXPECT_EQ(gpu.nccl_version, "2.21.5");
  EXPECT_EQ(gpu.cuda_version, "12.4");

  TrialReply ok;
  ok.id = 3;
  ok.ok = true;
  ok.step_times_s = {0.1, 0.2};
  ok.measured.loss = 1.5;
  ok.measured.finite = false;
  ok.measured.exposed_comm_s = 0.05;
  const auto reply = std::get<TrialReply>(decode_worker_message(encode_reply(ok)));
  EXPECT_TRUE(reply.ok);
  EXPECT_EQ(reply.step_times_s, ok.step_times_s);
  EXPECT_EQ(reply.measured.loss, 1.5);
  EXPECT_EQ(reply.measured.finite, false);
  EXPECT_EQ(reply.measured.exposed_comm_s, 0.05);
  EXPECT_FALSE(reply.measured.compute_s.has_value());

  TrialReply failed;
  failed.id = 4;
  failed.error = "RuntimeError: boom";
  const auto f = std::get<TrialReply>(decode_worker_message(encode_reply(failed)));
  EXPECT_FALSE(f.ok);
  EXPECT_EQ(f.error, "RuntimeError: boom");
  const auto fatal = std::get<WorkerFatal>(decode_worker_message(R"({"v":1,"type":"fatal","error":"out of memory"})"));
  EXPECT_EQ(fatal.error, "out of memory");
  EXPECT_FALSE(fatal.usage);
  const auto usage =
      std::get<WorkerFatal>(decode_worker_message(R"({"v":1,"type":"fatal","error":"no model x","usage":true})"));
  EXPECT_TRUE(usage.usage);
}

TEST(Protocol, RefusesOtherVersionsAndMalformedMessages) {
  EXPECT_THROW(decode_worker_message(R"({"v":2,"type":"fatal","error":"x"})"), Error);
  EXPECT_THROW(decode_worker_message("not json"), Error);
  EXPECT_THROW(decode_worker_message(R"({"type":"fatal","error":"x"})"), Error);
  EXPECT_THROW(decode_worker_message(R"({"v":1,"type":"gossip"})"), Error);
  EXPECT_THROW(decode_worker_message(R"({"v":1,"type":"result","id":1,"status":"ok"})"), Error);
  EXPECT_THROW(decode_worker_message(R"({"v":1,"type":"result","id":1,"status":"ok","step_times_s":"fast"})"), Error);
  EXPECT_THROW(decode_worker_message(R"({"v":1,"type":"result","id":1,"status":"maybe"})"), Error);
  // An ok result must say whether its losses stayed finite: a missing flag is not taken for "finite".
  EXPECT_THROW(decode_worker_message(R"({"v":1,"type":"result","id":1,"status":"ok","step_times_s":[0.1]})"), Error);
  EXPECT_THROW(decode_worker_message(
                   R"({"v":1,"type":"result","id":1,"status":"ok","step_times_s":[0.1],"finite":true,"loss":"low"})"),
               Error);
  EXPECT_THROW(decode_tuner_message(R"({"v":1,"type":"trial","id":1,"config":{"version":1,"streams":0},"warmup":1,"steps":1})"),
               InvalidArgument);
}

TEST(Protocol, NodeLinkMessagesRoundTripAndBadOnesAreErrors) {
  EXPECT_EQ(std::get<NodeHello>(decode_node_message(encode_node_hello({2}))).node_rank, 2);
  RankEvidence rank;
  rank.rank = 1;
  rank.exit_code = 137;
  rank.error = "RuntimeError: x";
  rank.caught_at_s = 0.25;
  rank.log_path = "/tmp/w/workers-1-rank1.log";
  rank.log_tail = {"a", "b"};
  rank.stack = "forward (m.py:9)";
  RankEvidence silent;
  silent.rank = 2;
  silent.launcher_exit_code = 137;
  const std::string line = encode_node_report({1, 4, 137, {rank, silent}});
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const auto back = std::get<NodeReport>(decode_node_message(line));
  EXPECT_EQ(back.node_rank, 1);
  EXPECT_EQ(back.launch, 4);
  EXPECT_EQ(back.launcher_exit_code, 137);
  ASSERT_EQ(back.ranks.size(), 2u);
  EXPECT_EQ(back.ranks[0].exit_code, 137);
  EXPECT_EQ(back.ranks[0].error, "RuntimeError: x");
  EXPECT_EQ(back.ranks[0].caught_at_s, 0.25);
  EXPECT_EQ(back.ranks[0].log_tail, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(back.ranks[0].stack, "forward (m.py:9)");
  EXPECT_FALSE(back.ranks[1].exit_code);
  EXPECT_EQ(back.ranks[1].launcher_exit_code, 137);
  EXPECT_FALSE(back.ranks[1].error);
  EXPECT_FALSE(back.ranks[1].stack);
  for (const char* bad : {R"({"v":1,"type":"node","node_rank":0})", R"({"v":1,"type":"node"})",
                          R"({"v":1,"type":"workers_ended","node_rank":1,"launch":1,"launcher_exit_code":1})",
                          R"({"v":1,"type":"workers_ended","node_rank":1,"launch":1,"launcher_exit_code":1,)"
                          R"("ranks":[{"rank":-1}]})",
                          R"({"v":1,"type":"workers_ended","node_rank":1,"launch":1,"launcher_exit_code":1,)"
                          R"("ranks":[{"rank":1,"error":"x"}]})",
                          R"({"v":1,"type":"hello"})", R"({"v":2,"type":"node","node_rank":1})", "GET / HTTP/1.1"}) {
    EXPECT_THROW(decode_node_message(bad), Error) << bad;
  }
  // Node 0's request, the other way.
  EXPECT_EQ(encode_end_workers({7}), R"({"trial":7,"type":"end_workers","v":1})");
  EXPECT_EQ(decode_node_zero_message(encode_end_workers({7})).trial, 7);
  EXPECT_FALSE(decode_node_zero_message(encode_end_workers({7})).relaunch);
  // A relaunch with another instance knob's value (NCCL's sockets; "0": NCCL's choice).
  EXPECT_EQ(encode_end_workers({8, true, NcclSockets{2, 4}}),
            R"({"relaunch":{"nccl_sockets":"2x4"},"trial":8,"type":"end_workers","v":1})");
  const EndWorkers relaunch = decode_node_zero_message(encode_end_workers({8, true, NcclSockets{2, 4}}));
  EXPECT_TRUE(relaunch.relaunch);
  EXPECT_EQ(to_string(relaunch.nccl_sockets), "2x4");
  const EndWorkers to_nccl = decode_node_zero_message(encode_end_workers({9, true, std::nullopt}));
  EXPECT_TRUE(to_nccl.relaunch);
  EXPECT_FALSE(to_nccl.nccl_sockets);
  for (const char* bad : {R"({"v":1,"type":"end_workers"})", R"({"v":1,"type":"end_workers","trial":-1})",
                          R"({"v":1,"type":"end_workers","trial":8,"relaunch":{"nccl_sockets":"32x4"}})",
                          R"({"v":1,"type":"end_workers","trial":8,"relaunch":{}})",
                          R"({"v":1,"type":"end_workers","trial":"7"})", R"({"v":1,"type":"node","node_rank":1})",
                          R"({"v":2,"type":"end_workers","trial":7})", "end"}) {
    EXPECT_THROW(decode_node_zero_message(bad), Error) << bad;
  }
}

}  // namespace
}  // namespace acspeed::tuner
