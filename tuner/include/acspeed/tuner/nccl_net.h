// Which network NCCL uses between nodes here, as far as the tuner can tell before any worker runs,
// and where NCCL's sockets knob (knobs.h: nccl_sockets) is searched because of it.
//
// NCCL (2.28.9/2.30.7, src/plugin/net.cc and src/init.cc) tries the net plugins NCCL_NET_PLUGIN names
// (default libnccl-net.so), then its internal IB net (every RDMA device, /sys/class/infiniband: IB,
// RoCE, AWS EFA), then its Socket net (TCP); NCCL_NET names one of them. Only the Socket net reads
// NCCL_SOCKET_NTHREADS and NCCL_NSOCKS_PERTHREAD (src/transport/net_socket.cc). So the net is Socket
// when NCCL_NET says Socket, or when no plugin is configured and no RDMA device exists (or
// NCCL_IB_DISABLE=1). What NCCL then chose is in its INFO line "Using network Socket" (NCCL_DEBUG=INFO).
// RDMA presence never changes the instance-type key (fingerprint.h): it changes only this.
#pragma once

#include <string>

#include "acspeed/tuner/search_space.h"

namespace acspeed::tuner {

struct NcclNet {
  bool socket = false;
  std::string why;  // "no /sys/class/infiniband device, no NCCL_NET_PLUGIN or NCCL_NET"
};

// From the environment (NCCL_NET, NCCL_NET_PLUGIN, NCCL_IB_DISABLE) and the RDMA devices listed in
// `infiniband_dir`.
NcclNet nccl_net(const std::string& infiniband_dir = "/sys/class/infiniband");

// Keeps NCCL's sockets searched only where they change something: NCCL's net is Socket between
// several nodes (or ranks sharing GPUs, which NCCL connects through its sockets), and the job's
// environment does not set NCCL_SOCKET_NTHREADS or NCCL_NSOCKS_PERTHREAD itself (the workers inherit
// those: a pin). Elsewhere the knob is held at NCCL's choice. Returns the plan's note on why it is or
// is not searched; "" when the space does not ask for it or ACSPEED_NCCL_SOCKETS pinned it.
std::string gate_nccl_sockets(SearchSpace& space, int nnodes, bool gpus_shared, const NcclNet& net);

}  // namespace acspeed::tuner
