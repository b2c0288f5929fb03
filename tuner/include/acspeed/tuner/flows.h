// A config's flows: the process groups that can carry its collectives between the same two nodes at
// once. Where the network caps each TCP connection (how many clouds shape traffic; the testbed's
// `NODESxPROCS@RATE/FLOWRATE`), N flows carry up to N times one flow's rate, up to the link's: a link
// fitted from one-flow trials is that flow's rate, not the link's. So the step model fits the link per
// flow count (step_model.h), and a config whose flow count no trial calibrated is measured, not
// forecast (step_model.h's flow_count_unmeasured).
//
// Counted from what acspeed's comm hook builds (python/acspeed/engine/lanes.py, issue.py, algorithms.py):
// each lane (a stream) has, per phase of the algorithm whose collectives cross nodes
// (comm_methods.h's crossing_phases), a group of its own where the issuer orders phases by completion
// (gloo: CompletionOrdered), so the phases of successive buckets overlap; where CUDA streams order the
// phases (NCCL on CUDA: StreamOrdered) the phases of one role share one communicator. A group over
// every rank crosses between two nodes once per direction (its ring); hierarchical's inter-node step
// runs on one group per local rank when the nodes have equal rank counts (each carries its shard at
// the same time), else among the nodes' leaders (one group).
//   flows = streams x (groups per role ? 1 : crossing phases) x (hierarchical on equal nodes ? ranks per node : 1)
//           x (NCCL with nccl_sockets set ? threads x sockets per thread : 1)
// PowerSGD's factor all-reduces (powersgd.py's extra slots) are not counted: its trials never
// calibrate the link (their communication spans hold its own compute), so a count of its own would
// leave every PowerSGD config without a forecast; its factors are a small share of the bytes.
// Where NCCL carries the collectives (groups_per_role: CUDA tensors on an NCCL backend) over its
// Socket net, each of its network connections spreads a message over NCCL_SOCKET_NTHREADS x
// NCCL_NSOCKS_PERTHREAD TCP sockets (NCCL 2.28.9/2.30.7 src/transport/net_socket.cc: a request is cut
// in up to that many tasks of at least NCCL_SOCKET_MIN_TASKSIZE, 64 KiB, one per socket), so a config
// with nccl_sockets set has that many times the flows. NCCL's own choice (unset) counts as 1: outside
// AWS and GCP NCCL opens no helper threads and sends on its one control connection; where its choice
// is more (AWS: 2x8, GCP: 4x1) the link fitted on NCCL's choice is that many flows' rate, and a set
// value counted otherwise is measured, not forecast. NCCL's channels (one connection each) are not
// counted: NCCL chooses them alike for every config that does not set them.
#pragma once

#include <string_view>

#include "acspeed/config.h"

namespace acspeed::tuner {

struct FlowSetup {
  int world_size = 0;
  int nnodes = 0;
  bool groups_per_role = false;  // the phases of one role share one group (NCCL on CUDA); else a group per phase
};

// Whether the hook shares one group between the phases of a role on this backend and device (issue.py:
// StreamOrdered, CUDA tensors on an NCCL backend).
bool groups_per_role(std::string_view backend, std::string_view device);

// The config's flows between two nodes; at least 1.
int flows(const CommConfig& config, const FlowSetup& setup);

}  // namespace acspeed::tuner
