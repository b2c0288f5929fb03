// The node link between node 0's tuner and the other nodes' acspeed-tune (tuner/src/node_link.h),
// over loopback: a node's report reaches node 0 with its node and its times on node 0's clock; node
// 0's request to end the workers reaches every node; a link that closes is a node that left the
// session; what is not a node of the session is refused.
#include "node_link.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "acspeed/error.h"

namespace acspeed::tuner {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

double monotonic_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Polls until `done` or 5 s passed.
template <typename F>
bool poll_until(NodeLinks& links, F done) {
  const auto deadline = Clock::now() + seconds(5);
  while (!done() && Clock::now() < deadline) links.poll(milliseconds(50));
  return done();
}

TEST(NodeLink, AReportReachesNodeZeroWithItsNodeAndNodeZerosClock) {
  NodeLinks links(0, 3);
  NodeLink node1("127.0.0.1", links.port(), 1, seconds(5));
  RankEvidence died;
  died.rank = 1;
  died.exit_code = 3;
  died.log_path = "/tmp/w/workers-1-rank1.log";
  died.log_tail = {"tiny_models: firing exit"};
  RankEvidence lost_peer;
  lost_peer.rank = 2;
  lost_peer.exit_code = 1;
  lost_peer.error = "RuntimeError: Connection closed by peer";
  lost_peer.caught_at_s = monotonic_now() - 0.5;  // this node's clock (one machine here: the same as node 0's)
  const double sent = monotonic_now();
  node1.report(1, 1, {died, lost_peer});
  ASSERT_TRUE(poll_until(links, [&] { return !links.reported_ranks().empty(); }));
  const double received = monotonic_now();
  // Node 2 never linked: only node 1's report is awaited, and it is there.
  const auto started = Clock::now();
  links.await_reports(started + seconds(30));
  EXPECT_LT(Clock::now() - started, seconds(5));
  const auto ranks = links.reported_ranks();
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0].rank, 1);
  EXPECT_EQ(ranks[0].node, 1);
  EXPECT_EQ(ranks[0].exit_code, 3);
  EXPECT_EQ(ranks[0].log_tail, died.log_tail);
  EXPECT_EQ(ranks[1].node, 1);
  // Node 1 says how long ago, node 0 counts back from when the report arrived: on node 0's clock, the
  // time is late by the report's transit at most (scheduling under load included), never early.
  EXPECT_GE(ranks[1].caught_at_s, lost_peer.caught_at_s - 1e-6);
  EXPECT_LE(ranks[1].caught_at_s, lost_peer.caught_at_s + (received - sent) + 1e-6);
  EXPECT_FALSE(links.lost());
  // A new trial: the reports so far are about earlier launches.
  links.forget_reports();
  EXPECT_TRUE(links.reported_ranks().empty());
}

TEST(NodeLink, ALinkThatClosesIsANodeThatLeftTheSession) {
  NodeLinks links(0, 2);
  {
    NodeLink node1("127.0.0.1", links.port(), 1, seconds(5));
    RankEvidence went_down;
    went_down.rank = 1;
    went_down.launcher_exit_code = 137;
    node1.report(1, 137, {went_down});  // its last words, read although the link closes right after
  }
  ASSERT_TRUE(poll_until(links, [&] { return links.lost().has_value(); }));
  EXPECT_EQ(links.lost()->rfind("node 1 (127.0.0.1) left the session: its acspeed-tune closed the link to node 0", 0),
            0u)
      << *links.lost();
  ASSERT_EQ(links.reported_ranks().size(), 1u);
  EXPECT_EQ(links.reported_ranks()[0].launcher_exit_code, 137);
  // Waiting for reports does not wait for a node that left.
  const auto started = Clock::now();
  links.await_reports(started + seconds(30));
  EXPECT_LT(Clock::now() - started, seconds(5));
}

TEST(NodeLink, NodeZerosEndClosesTheLinkOnTheOtherNode) {
  auto links = std::make_unique<NodeLinks>(0, 2);
  NodeLink node1("127.0.0.1", links->port(), 1, seconds(5));
  EXPECT_FALSE(node1.closed(milliseconds(100)));
  links.reset();
  EXPECT_TRUE(node1.closed(milliseconds(2000)));
  node1.report(1, 1, {});  // into a closed link: not an error
}

TEST(NodeLink, NodeZerosRequestToEndTheWorkersReachesEveryLinkedNodeOnce) {
  NodeLinks links(0, 3);
  NodeLink node1("127.0.0.1", links.port(), 1, seconds(5));
  NodeLink node2("127.0.0.1", links.port(), 2, seconds(5));
  RankEvidence rank;
  node1.report(1, 1, {rank});
  node2.report(1, 1, {rank});
  ASSERT_TRUE(poll_until(links, [&] { return links.reported_ranks().size() == 2; }));  // both linked
  links.end_workers({7});
  for (NodeLink* node : {&node1, &node2}) {
    std::optional<EndWorkers> request;
    const auto deadline = Clock::now() + seconds(5);
    while (!request && Clock::now() < deadline) {
      EXPECT_FALSE(node->closed(milliseconds(50)));
      request = node->take_end_request();
    }
    ASSERT_TRUE(request);
    EXPECT_EQ(request->trial, 7);
    EXPECT_FALSE(node->take_end_request());  // taken once
  }
}

TEST(NodeLink, WhatIsNotANodeOfTheSessionIsRefusedAndLeavesNoTrace) {
  NodeLinks links(0, 2);
  for (const std::string line : {"GET / HTTP/1.1", R"({"v":1,"type":"node","node_rank":5})"}) {
    // A raw connection, as anything on the network could open: node 0 closes it.
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(links.port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    const std::string text = line + "\n";
    ASSERT_EQ(send(fd, text.data(), text.size(), 0), static_cast<ssize_t>(text.size()));
    char byte;
    ASSERT_TRUE(poll_until(links, [&] { return recv(fd, &byte, 1, MSG_DONTWAIT) == 0; })) << line;
    close(fd);
    links.poll(milliseconds(100));
    EXPECT_FALSE(links.lost()) << line;
  }
  // A second node 1 while the first is linked is refused; the first stays.
  NodeLink first("127.0.0.1", links.port(), 1, seconds(5));
  links.poll(milliseconds(100));
  NodeLink second("127.0.0.1", links.port(), 1, seconds(5));
  EXPECT_TRUE(poll_until(links, [&] { return second.closed(milliseconds(0)); }));
  EXPECT_FALSE(first.closed(milliseconds(0)));
}

TEST(NodeLink, ALineLongerThanOneMebibyteClosesTheLink) {
  NodeLinks links(0, 2);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(links.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));  // in progress: the sends below wait for it
  // A node's hello, then a line that never ends; node 0 reads while it arrives.
  std::string text = std::string(R"({"v":1,"type":"node","node_rank":1})") + "\n" +
                     std::string(kNodeLinkMaxLine + 1, 'x');
  size_t sent = 0;
  const auto deadline = Clock::now() + seconds(10);
  while (sent < text.size() && Clock::now() < deadline) {
    const ssize_t n = send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n > 0) sent += static_cast<size_t>(n);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOTCONN) break;  // closed by node 0
    links.poll(milliseconds(10));
  }
  char byte;
  EXPECT_TRUE(poll_until(links, [&] {  // closed with unread bytes: a reset rather than an end of stream
    const ssize_t n = recv(fd, &byte, 1, MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }));
  close(fd);
  EXPECT_EQ(kNodeLinkMaxLine, size_t{1} << 20);
}

TEST(NodeLink, NoNodeZeroIsAnErrorNamingWhereItWasLookedFor) {
  int port;
  {
    NodeLinks gone(0, 2);
    port = gone.port();
  }
  try {
    NodeLink node1("127.0.0.1", port, 1, seconds(1));
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("cannot reach node 0's acspeed-tune at 127.0.0.1:{}", port)),
              std::string::npos)
        << e.what();
  }
}

TEST(NodeLink, ThePortIsTheOneAfterTheRendezvousPort) {
  EXPECT_EQ(node_link_port(29500), 29501);
  EXPECT_THROW(node_link_port(65535), InvalidArgument);
}

}  // namespace
}  // namespace acspeed::tuner
