// The node link: in a session of several nodes, the acspeed-tune on every other node (which only
// supervises that node's workers, trial_runner.h supervise_workers) holds a TCP connection to node
// 0's tuner, at node 0's address and MASTER_PORT + 1, for the whole session. Over it (protocol.h)
// the node says which node it is and, each time its workers end abnormally, what they left behind
// (rank_failure.h: exit codes, errors, the last lines of each rank's log), so that node 0 names the
// rank of another node that made a trial fail, not the lost peer its own rank saw. A link that
// closes says that node's acspeed-tune is gone: its workers can no longer be restarted, so node 0
// ends the session at once instead of waiting for them at every later trial. When a trial times
// out, node 0 asks the other nodes to end their workers, which may hang where node 0 cannot reach
// them: each reports what they left (their stack dumps among it), so the trial's reason says where
// every node's ranks were.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "line_reader.h"
#include "protocol.h"
#include "rank_failure.h"

namespace acspeed::tuner {

// The longest line a link accepts (a report holds a few log lines per rank); longer: not the protocol.
inline constexpr size_t kNodeLinkMaxLine = 1 << 20;

// The port of the node link: the one after the rendezvous port. Throws InvalidArgument when there
// is none (65535).
int node_link_port(int master_port);

// Node 0's end: listens on every address at `port`, accepts the other nodes and reads what they
// send whenever poll() is called (never blocking longer than asked).
class NodeLinks {
 public:
  // `port` 0: any free one (tests), which port() tells.
  NodeLinks(int port, int nnodes);
  ~NodeLinks();
  NodeLinks(const NodeLinks&) = delete;
  NodeLinks& operator=(const NodeLinks&) = delete;

  // Accepts new nodes and reads their messages, waiting up to `wait` for the first event.
  void poll(std::chrono::milliseconds wait);
  // A trial begins: what the nodes reported so far is about earlier launches.
  void forget_reports();
  // Trial `end.trial` timed out: asks every linked node to end its workers and report what they left;
  // with end.relaunch, to end them and launch them again with its values.
  void end_workers(const EndWorkers& end);
  // Waits (polling) until every linked node reported since forget_reports(), a link closed, or the deadline.
  void await_reports(std::chrono::steady_clock::time_point deadline);
  // The ranks the reports since forget_reports() carry, each with its node and caught_at_s on this
  // node's monotonic clock.
  std::vector<RankEvidence> reported_ranks() const;
  // "node 1 (10.254.213.2) left the session: its acspeed-tune closed the link to node 0 ...", once
  // a linked node's link closed; nullopt while every linked node is there.
  std::optional<std::string> lost() const;
  int port() const;

 private:
  struct Peer {
    int fd = -1;
    std::string address;
    LineReader lines{kNodeLinkMaxLine};
    std::optional<int> node;  // after its hello
  };
  struct Linked {
    std::string address;
    bool closed = false;
    std::optional<NodeReport> report;   // the last since forget_reports()
    double reported_at_s = 0;           // CLOCK_MONOTONIC when it arrived
  };
  void accept_new();
  // Reads what `peer` sent; false when its link closed or it broke the protocol.
  bool read_from(Peer& peer);
  void handle(Peer& peer, const std::string& line);

  int listen_fd_ = -1;
  int nnodes_ = 0;
  std::vector<Peer> peers_;
  std::map<int, Linked> linked_;  // by node rank
};

// The end on another node: connects to node 0 (retrying until `give_up` has passed: node 0 may
// start later) and says which node this is. Throws Error when node 0 never answers,
// process::Interrupted when interrupted.
class NodeLink {
 public:
  NodeLink(const std::string& master_addr, int port, int node_rank, std::chrono::seconds give_up);
  ~NodeLink();
  NodeLink(const NodeLink&) = delete;
  NodeLink& operator=(const NodeLink&) = delete;

  // Sends what a launch's workers left (ranks' caught_at_s on this node's monotonic clock); a link
  // that closed meanwhile is not an error (node 0 is gone: closed() says so).
  void report(int launch, int launcher_exit_code, std::vector<RankEvidence> ranks);
  // Whether node 0 closed the link (its session ended, or it died), waiting up to `wait` to see it;
  // what node 0 sent meanwhile is read (take_end_request).
  bool closed(std::chrono::milliseconds wait);
  // Node 0's request to end this node's workers (a trial timed out) that came since the last call,
  // read by closed(); nullopt when none came.
  std::optional<EndWorkers> take_end_request();
  std::string endpoint() const { return endpoint_; }

 private:
  int fd_ = -1;
  int node_rank_ = 0;
  bool closed_ = false;
  std::string endpoint_;  // "ADDR:PORT"
  LineReader lines_{kNodeLinkMaxLine};  // what node 0 sent
  std::optional<EndWorkers> end_request_;
};

}  // namespace acspeed::tuner
