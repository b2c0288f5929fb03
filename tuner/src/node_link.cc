#include "node_link.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "acspeed/error.h"
#include "acspeed/log.h"
#include "acspeed/process/signals.h"

namespace acspeed::tuner {
namespace {

using Clock = std::chrono::steady_clock;

double monotonic_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // the clock the workers' time.monotonic() reads
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string address_of(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(addr).sin_addr, text, sizeof(text));
  } else if (addr.ss_family == AF_INET6) {
    const auto& a6 = reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) {
      inet_ntop(AF_INET, &a6.s6_addr[12], text, sizeof(text));
    } else {
      inet_ntop(AF_INET6, &a6, text, sizeof(text));
    }
  }
  return text;
}

// A listening socket on every address at `port`: IPv6 with IPv4 mapped in, else IPv4 only (a
// network namespace may have no IPv6).
int listen_on(int port) {
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1, zero = 0;
  if (fd >= 0) {
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(static_cast<uint16_t>(port));
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && listen(fd, 16) == 0) return fd;
    close(fd);
  }
  fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) ACS_THROW(Error, "socket(): {}", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 16) != 0) {
    const int error = errno;
    close(fd);
    ACS_THROW(Error, "cannot listen on port {} for the other nodes' acspeed-tune (the node link, --master-port + 1): {}",
              port, std::strerror(error));
  }
  return fd;
}

// One attempt to connect to host:port within `wait`; the connected socket, or -1 with `why` set.
int connect_once(const std::string& host, int port, std::chrono::milliseconds wait, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    *why = gai_strerror(rc);
    return -1;
  }
  int connected = -1;
  for (addrinfo* a = found; a != nullptr && connected < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int error = 0;
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      error = errno;
      if (error == EINPROGRESS) {
        pollfd pfd{fd, POLLOUT, 0};
        socklen_t len = sizeof(error);
        if (::poll(&pfd, 1, static_cast<int>(wait.count())) == 1) {
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
        } else {
          error = ETIMEDOUT;
        }
      }
    }
    if (error == 0) {
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      connected = fd;
    } else {
      *why = std::strerror(error);
      close(fd);
    }
  }
  freeaddrinfo(found);
  return connected;
}

bool send_line(int fd, const std::string& text) {
  const std::string line = text + "\n";
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = send(fd, line.data() + done, line.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

int node_link_port(int master_port) {
  if (master_port < 1 || master_port > 65534) {
    ACS_THROW(InvalidArgument, "--master-port {} leaves no port for the node link, which uses the next one "
              "(accepted with several nodes: 1 to 65534)", master_port);
  }
  return master_port + 1;
}

NodeLinks::NodeLinks(int port, int nnodes) : listen_fd_(listen_on(port)), nnodes_(nnodes) {}

NodeLinks::~NodeLinks() {
  for (auto& peer : peers_) close(peer.fd);
  if (listen_fd_ >= 0) close(listen_fd_);
}

int NodeLinks::port() const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  return ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(addr).sin6_port
                                          : reinterpret_cast<const sockaddr_in&>(addr).sin_port);
}

void NodeLinks::accept_new() {
  for (;;) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN: none left (or the peer gave up before we took it)
    Peer peer;
    peer.fd = fd;
    peer.address = address_of(addr);
    peers_.push_back(std::move(peer));
  }
}

bool NodeLinks::read_from(Peer& peer) {
  const bool open = peer.lines.fill(peer.fd);  // what it sent before it closed still counts (a report, then its end)
  while (const auto line = peer.lines.next()) {
    try {
      handle(peer, *line);
    } catch (const Error& e) {
      ACS_WARN("node link from {}: {}; closing it", peer.address, e.what());
      return false;
    }
  }
  if (open && peer.lines.overlong()) {
    ACS_WARN("node link from {}: a line longer than {} bytes; closing it", peer.address, kNodeLinkMaxLine);
    return false;
  }
  return open;
}

void NodeLinks::handle(Peer& peer, const std::string& line) {
  const NodeMessage message = decode_node_message(line);
  if (const auto* hello = std::get_if<NodeHello>(&message)) {
    if (peer.node) ACS_THROW(Error, "node {} said which node it is twice", *peer.node);
    if (hello->node_rank >= nnodes_) {
      ACS_THROW(Error, "node {} is not a node of this session (nodes 0..{})", hello->node_rank, nnodes_ - 1);
    }
    if (const auto it = linked_.find(hello->node_rank); it != linked_.end() && !it->second.closed) {
      ACS_THROW(Error, "node {} is linked already (from {})", hello->node_rank, it->second.address);
    }
    peer.node = hello->node_rank;
    linked_[hello->node_rank] = Linked{peer.address, false, std::nullopt, 0};
    ACS_DEBUG("node link: node {} from {}", hello->node_rank, peer.address);
    return;
  }
  const auto& report = std::get<NodeReport>(message);
  if (!peer.node || report.node_rank != *peer.node) {
    ACS_THROW(Error, "a report for node {} on the link of {}", report.node_rank,
              peer.node ? fmt::format("node {}", *peer.node) : "a node that did not say which it is");
  }
  Linked& linked = linked_[*peer.node];
  if (!linked.report) {  // the first since forget_reports(): later ones are relaunches after it
    linked.report = report;
    linked.reported_at_s = monotonic_s();
  }
}

void NodeLinks::poll(std::chrono::milliseconds wait) {
  std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}};
  for (const auto& peer : peers_) fds.push_back({peer.fd, POLLIN, 0});
  if (::poll(fds.data(), fds.size(), static_cast<int>(wait.count())) <= 0) return;
  std::vector<Peer> kept;
  for (size_t i = 0; i < peers_.size(); ++i) {
    Peer& peer = peers_[i];
    if (fds[i + 1].revents == 0 || read_from(peer)) {
      kept.push_back(std::move(peer));
      continue;
    }
    close(peer.fd);
    if (peer.node) linked_[*peer.node].closed = true;
  }
  peers_ = std::move(kept);
  if (fds[0].revents & POLLIN) accept_new();
}

void NodeLinks::forget_reports() {
  poll(std::chrono::milliseconds(0));  // what was sent before this trial began is in the buffers by now
  for (auto& [node, linked] : linked_) linked.report.reset();
}

void NodeLinks::end_workers(const EndWorkers& end) {
  const std::string line = encode_end_workers(end);
  // A link that fails here has closed: the next poll() sees it.
  for (const auto& peer : peers_) {
    if (peer.node) send_line(peer.fd, line);
  }
}

void NodeLinks::await_reports(Clock::time_point deadline) {
  for (;;) {
    poll(std::chrono::milliseconds(0));
    const bool all = std::all_of(linked_.begin(), linked_.end(),
                                 [](const auto& entry) { return entry.second.closed || entry.second.report; });
    if (all || lost() || Clock::now() >= deadline) return;
    process::throw_if_interrupted();
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    poll(std::clamp(left, std::chrono::milliseconds(0), std::chrono::milliseconds(200)));
  }
}

std::vector<RankEvidence> NodeLinks::reported_ranks() const {
  std::vector<RankEvidence> ranks;
  for (const auto& [node, linked] : linked_) {
    if (!linked.report) continue;
    for (RankEvidence r : linked.report->ranks) {
      r.node = node;
      if (r.error) r.caught_at_s = linked.reported_at_s - r.caught_at_s;  // seconds ago -> this node's clock
      ranks.push_back(std::move(r));
    }
  }
  return ranks;
}

std::optional<std::string> NodeLinks::lost() const {
  for (const auto& [node, linked] : linked_) {
    if (linked.closed) {
      return fmt::format("node {} ({}) left the session: its acspeed-tune closed the link to node 0 (it ended, or "
                         "its machine or the network went away), so its workers cannot be restarted",
                         node, linked.address);
    }
  }
  return std::nullopt;
}

NodeLink::NodeLink(const std::string& master_addr, int port, int node_rank, std::chrono::seconds give_up)
    : node_rank_(node_rank), endpoint_(fmt::format("{}:{}", master_addr, port)) {
  const auto deadline = Clock::now() + give_up;
  std::string why;
  while ((fd_ = connect_once(master_addr, port, std::chrono::milliseconds(1000), &why)) < 0) {
    process::throw_if_interrupted();
    if (Clock::now() > deadline) {
      ACS_THROW(Error, "node {}: cannot reach node 0's acspeed-tune at {} (the node link, --master-port + 1) for {} s: "
                "{}; is it running, with the same --master-addr and --master-port?",
                node_rank, endpoint_, give_up.count(), why);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (!send_line(fd_, encode_node_hello({node_rank}))) closed_ = true;
}

NodeLink::~NodeLink() {
  if (fd_ >= 0) close(fd_);
}

void NodeLink::report(int launch, int launcher_exit_code, std::vector<RankEvidence> ranks) {
  const double now = monotonic_s();
  for (auto& r : ranks) {
    if (r.error) r.caught_at_s = std::max(0.0, now - r.caught_at_s);
  }
  if (closed_ || !send_line(fd_, encode_node_report({node_rank_, launch, launcher_exit_code, std::move(ranks)}))) {
    closed_ = true;
  }
}

bool NodeLink::closed(std::chrono::milliseconds wait) {
  if (closed_) return true;
  pollfd pfd{fd_, POLLIN, 0};
  if (::poll(&pfd, 1, static_cast<int>(wait.count())) <= 0) return false;
  if (!lines_.fill(fd_)) closed_ = true;
  while (const auto line = lines_.next()) {
    try {
      end_request_ = decode_node_zero_message(*line);
    } catch (const Error& e) {
      ACS_WARN("node link to node 0 ({}): {}; ignoring it", endpoint_, e.what());
    }
  }
  if (lines_.overlong()) {
    ACS_WARN("node link to node 0 ({}): a line longer than {} bytes; ignoring it", endpoint_, kNodeLinkMaxLine);
    lines_.clear();
  }
  return closed_;
}

std::optional<EndWorkers> NodeLink::take_end_request() { return std::exchange(end_request_, std::nullopt); }

}  // namespace acspeed::tuner
