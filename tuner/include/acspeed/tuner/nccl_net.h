// Which network NCCL uses between nodes here, as far as the tuner can tell before any worker runs,
// and where NCCL's sockets knob (knobs.h: nccl_sockets) is searched because of it.
//
// NCCL (2.28.9/2.30.7, src/plugin/net.cc and src/init.cc) tries the net plugins NCCL_NET_PLUGIN names
// (default libnccl-net.so), then its internal IB net (every RDMA device, /sys/class/infiniband: IB,
// RoCE, AWS EFA), then its Socket net (TCP); NCCL_NET names one of them. Only the Socket net reads
// NCCL_SOCKET_NTHREADS and NCCL_NSOCKS_PERTHREAD (src/transport/net_socket.cc). So the net is Socket
// when NCCL_NET says Socket, or when no plugin is configured and no RDMA device exists (or
// NCCL_IB_DISABLE=1). That is the plan's view, before any worker runs (nccl_net()). What NCCL then
// chose is its INFO line "Using network NAME" (nccl_net_in_log): a GPU session's workers run with
// NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET and NCCL_DEBUG_FILE in the session's work folder (unless
// the job sets NCCL's logging itself: trial_runner.h), and the session reads the line after its first
// trial. Where the line and the plan's view disagree the line wins, as it is what NCCL did
// (nccl_net_note). RDMA presence never changes the instance-type key (fingerprint.h): it
// changes only this.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "acspeed/tuner/search_space.h"

namespace acspeed::tuner {

struct NcclNet {
  bool socket = false;
  std::string why;  // "no /sys/class/infiniband device, no NCCL_NET_PLUGIN or NCCL_NET"
};

// From the environment (NCCL_NET, NCCL_NET_PLUGIN, NCCL_IB_DISABLE) and the RDMA devices listed in
// `infiniband_dir`.
NcclNet nccl_net(const std::string& infiniband_dir = "/sys/class/infiniband");

// The net NCCL chose for a communicator, from the INFO line it prints when it picks it: NCCL
// v2.28.9-1 src/init.cc:428 and v2.30.7-1 src/init.cc:486, INFO(NCCL_INIT, "Using network %s",
// comm->ncclNet->name), which src/debug.cc (ncclDebugLogV) prints as
// "[TIMESTAMP ]HOST:PID:TID [DEV] NCCL INFO Using network NAME" (the timestamp only where
// NCCL_DEBUG_TIMESTAMP_LEVELS includes INFO). NAME is "Socket" or "IB" (NCCL's own nets) or a net
// plugin's name, spaces included ("AWS Libfabric"). The first such line of `log`; nullopt: none.
std::optional<std::string> nccl_net_in_log(std::string_view log);

// NCCL's net as its INFO lines in the files of `folder` whose names start with `prefix` say (one file
// per rank and launch): Socket when every line names Socket; `why` quotes the names. nullopt: no
// file holds the line (no communicator yet, or NCCL wrote no log there).
std::optional<NcclNet> nccl_net_from_logs(const std::string& folder, std::string_view prefix);

// The session's note on NCCL's net as its line says (`seen`, nccl_net_from_logs) against the plan's
// view (`planned`, nccl_net()). Where they disagree the line wins, as it is what NCCL did: another net
// than Socket means that no decision keeps a sockets value (NCCL's other nets do not read them: the
// session drops it from the candidate before the decision pairs); Socket where the plan saw another
// net means that the sockets were not searched, and the note says how to search them.
std::string nccl_net_note(const NcclNet& planned, const NcclNet& seen);

// Keeps NCCL's sockets searched only where they change something: NCCL's net is Socket between
// several nodes (or ranks sharing GPUs, which NCCL connects through its sockets), and the job's
// environment does not set NCCL_SOCKET_NTHREADS or NCCL_NSOCKS_PERTHREAD itself (the workers inherit
// those: a pin). Elsewhere the knob is held at NCCL's choice. Returns the plan's note on why it is or
// is not searched; "" when the space does not ask for it or ACSPEED_NCCL_SOCKETS pinned it.
std::string gate_nccl_sockets(SearchSpace& space, int nnodes, bool gpus_shared, const NcclNet& net);

}  // namespace acspeed::tuner
