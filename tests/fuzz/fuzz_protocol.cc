// Fuzz target: the worker protocol's messages (tuner/src/protocol.cc), one JSON line each way, and
// the node link's (what another node's acspeed-tune sends node 0 over TCP, and node 0's requests).
// The input is decoded as a line from rank 0, as a line from the tuner, as a node link line and as
// a line from node 0. Properties: any line is either a message or an acspeed::Error (nothing else
// escapes); a decoded hello, result, trial, node or end_workers message encodes to a line that
// decodes and encodes to the same line again.
#include <string>
#include <variant>

#include "acspeed/error.h"
#include "fuzz_check.h"
#include "protocol.h"

namespace {

using namespace acspeed;
using namespace acspeed::tuner;

template <typename Message>
void check_stable(const Message& message, std::string (*encode)(const Message&)) {
  const std::string once = encode(message);
  std::string twice;
  try {
    twice = encode(std::get<Message>(decode_worker_message(once)));
  } catch (const Error& e) {
    fuzz::broken("an encoded worker message decodes", once + "\n" + e.what());
  }
  if (twice != once) fuzz::broken("encode(decode(encode(m))) == encode(m)", once + "\n---\n" + twice);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line = fuzz::text_of(data, size);
  try {
    const WorkerMessage message = decode_worker_message(line);
    if (const auto* hello = std::get_if<WorkerHello>(&message)) check_stable(*hello, &encode_hello);
    if (const auto* reply = std::get_if<TrialReply>(&message)) check_stable(*reply, &encode_reply);
  } catch (const Error&) {
  }
  try {
    const auto message = decode_tuner_message(line);
    if (const auto* trial = std::get_if<TrialRequest>(&message)) {
      const std::string once = encode_trial(*trial);
      std::string twice;
      try {
        twice = encode_trial(std::get<TrialRequest>(decode_tuner_message(once)));
      } catch (const Error& e) {
        fuzz::broken("an encoded trial decodes", once + "\n" + e.what());
      }
      if (twice != once) fuzz::broken("encode_trial is stable over a round trip", once + "\n---\n" + twice);
    }
  } catch (const Error&) {
  }
  try {
    const NodeMessage message = decode_node_message(line);
    auto encode = [](const NodeMessage& m) {
      if (const auto* hello = std::get_if<NodeHello>(&m)) return encode_node_hello(*hello);
      return encode_node_report(std::get<NodeReport>(m));
    };
    const std::string once = encode(message);
    std::string twice;
    try {
      twice = encode(decode_node_message(once));
    } catch (const Error& e) {
      fuzz::broken("an encoded node message decodes", once + "\n" + e.what());
    }
    if (twice != once) fuzz::broken("a node message is stable over a round trip", once + "\n---\n" + twice);
  } catch (const Error&) {
  }
  try {
    const std::string once = encode_end_workers(decode_node_zero_message(line));
    std::string twice;
    try {
      twice = encode_end_workers(decode_node_zero_message(once));
    } catch (const Error& e) {
      fuzz::broken("an encoded end_workers decodes", once + "\n" + e.what());
    }
    if (twice != once) fuzz::broken("end_workers is stable over a round trip", once + "\n---\n" + twice);
  } catch (const Error&) {
  }
  return 0;
}
