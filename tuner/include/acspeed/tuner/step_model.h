// The step-time model of a tuning session: calibrated from what its trials measured, it predicts a
// config's step time and bounds it, on the link it was calibrated on or on another link rate and
// node count.
//
// Calibration (calibrate(), from the session's ok trials):
//   compute     C = the compute-only step: the session's "compute" trial runs forward, backward and
//                 the optimizer on the bare model, with no DDP and no communication (on the CPU and
//                 on a GPU alike; on a GPU the device is synchronized around each phase). It also
//                 times forward + optimizer: S_serial, the compute no gradient communication can
//                 overlap (DDP starts communicating during backward; the optimizer needs every bucket).
//   link        per flow count (flows.h: the groups that carry a config's collectives between two
//                 nodes at once), and within it per algorithm and pooled over its algorithms,
//                 fit_link() on every trial that ran acspeed's hook, except powersgd's (their
//                 communication spans also hold PowerSGD's own compute, the orthonormalisation and
//                 Q = M^T P between the two all-reduces), and except fp16/bf16's in a flow count that
//                 an uncast trial calibrated: a cast's spans also hold its conversions and, on gloo,
//                 its half-precision sums on the CPU, which a fit over both takes for a faster link
//                 with a large latency (the 2x1@1gbit seed run: 1 flow at 1533 Mbit/s and 59 ms a
//                 collective from the calibration and one fp16 trial, DDP defaults bounded at 344 ms,
//                 under their wire time alone; bench/compression/RESULTS.md); that CPU work stays in
//                 a cast config's head and CPU floor. Collectives = buckets / streams, wire bytes =
//                 the buckets' payload x the compression's wire fraction x the algorithm's factor,
//                 time = the probe's per-step communication time. Fits are never shared between flow
//                 counts: on a link capped per flow, N flows carry up to N times one flow's rate, so a
//                 config of a flow count no trial calibrated is not predicted (flow_count_unmeasured).
//                 DDP's defaults run no hook, so the session measures them once more through acspeed's
//                 plain allreduce hook (role "calibration"): the same buckets and bytes as DDP's
//                 built-in allreduce, now with per-bucket times.
//   gradients   the gradients' shapes (gradient_layout.h), which the compute-only trial carries from
//                 the workers' hello: what PowerSGD's wire bytes are counted from.
//   overlap     per measured config, its head h = measured step - modelled communication time: the
//                 part of the step that communication did not overlap (forward, the backward before the
//                 first bucket, the optimizer, and whatever the config's own CPU work costs).
//   CPU floor  per measured config, F = the median of its trials' cpu_floor_s (trial_metrics.h): the
//                 busy time of a rank's cores per step over their count, so everything the step costs
//                 those cores (compute, the hook's casts, gloo's threads, the network stack's softirq);
//                 at most its measured step (more was other work sharing the cores).
//                 A faster link does not shrink it (the bytes and casts stay), so where the link stops
//                 being the bottleneck the step follows F: on the 2x1 testbed (one core per node) the
//                 fp16 config measured 234-236 ms at 1.5 and 2 Gbit/s with F = 228 ms from the 1 Gbit/s
//                 calibration (bench/model/RESULTS.md). CPU trials only: on a GPU the host thread
//                 spin-waits in synchronisation, which would count as busy (no F there: no floor).
// Prediction:  T = buckets / streams x collectives per bucket x latency + wire bytes / bandwidth, the
//   latency and bandwidth of the config's flow count (and algorithm, when fitted, else pooled);
//   step = max(C, h + T, bound, F). Collectives per bucket: 1; powersgd 3 (the 1-D sums, P, Q).
//   An untried config takes the median head of measured configs with its compression (else of all,
//   plus its PowerSGD compute K when the head comes from another compression), and its F the same
//   way (none when nothing measured one: then no floor).
// Bound:       max(C, S_serial + wire bytes / bandwidth) + K: no step is faster than its compute, nor
//   than its wire time plus the compute that cannot overlap it (forward and the optimizer); K,
//   PowerSGD's own compute per step (the trials' compression_s: compressing, the factors'
//   matrix products, orthonormalisation, decompressing), overlaps neither, since the factors wait on
//   it and it runs on the compute's own device (0 for other compressions). An untried powersgd config
//   takes the median K of measured configs with its rank, else none: its bound stays a lower bound
//   and its forecast is optimistic, so the model strategy measures it rather than prunes it.
//   Per-collective latency, the hook's other work and the CPU floor F are not in the bound. Efficiency = bound /
//   measured step.
// Wire bytes on the bottleneck (inter-node) link per node and step, S = what one rank hands its
//   collectives per step (gradient_layout.h sent_bytes): ring allreduce and reduce-scatter +
//   all-gather 2(W-1)/W x S over W ranks, hierarchical 2(N-1)/N x S over N nodes (with powersgd the
//   leaders' inter-node step). S is the probe's gradient payload P for no compression, P/2 for
//   fp16/bf16, and for powersgd the factors P (rows x r) and Q (columns x r) of each matrix at its
//   clamped rank plus the 1-D gradients whole. Other node counts keep each rank's compute, its CPU
//   floor (each rank keeps its own cores) and the per-node link.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "acspeed/config.h"
#include "acspeed/roles_and_statuses.h"
#include "acspeed/store.h"
#include "acspeed/tuner/flows.h"
#include "acspeed/tuner/gradient_layout.h"
#include "acspeed/tuner/link_fit.h"
#include "acspeed/tuner/trial_metrics.h"

namespace acspeed::tuner {

// A link fit leaving more than this share of the communication times unexplained (LinkFit::
// relative_error) makes a prediction unreliable: Prediction::reliable is false.
inline constexpr double kReliableLinkError = 0.10;

struct ModelTrial {
  TrialRole role;
  CommConfig config;
  TrialMetrics metrics;  // of an ok trial
};

struct ModelSetup {
  int world_size = 0;
  int nnodes = 0;
  bool groups_per_role = false;  // the workers' hook shares a group per role (flows.h; NCCL on CUDA)
};

// The link as the configs of one flow count see it.
struct FlowLink {
  std::map<Algorithm, LinkFit> fits;  // per algorithm
  LinkFit pooled;                     // over every algorithm of this flow count
};

// A config the session measured.
struct MeasuredConfig {
  CommConfig config;
  double step_s = 0;                 // median of its trials' p50 (calibration trials excluded)
  std::optional<int> buckets;        // per step, from the probe
  std::optional<double> comm_s;      // modelled communication time on the calibration link
  std::optional<double> head_s;      // step_s - comm_s, at least 0
  std::optional<double> compression_s;  // powersgd: median of its trials' PowerSGD compute per step
  std::optional<double> cpu_floor_s;    // F: median of its trials' cpu_floor_s
};

struct StepModel {
  ModelSetup setup;
  std::optional<double> compute_s;    // C
  std::optional<double> serial_s;     // forward + optimizer of the compute-only step
  std::optional<int64_t> payload_bytes;  // gradient bytes per step, before compression
  std::optional<GradientLayout> gradients;  // the gradients' shapes (PowerSGD's bytes)
  std::map<int, FlowLink> links;      // per flow count (flows.h); only the counts some trial calibrated
  std::vector<MeasuredConfig> measured;
};

StepModel calibrate(const std::vector<ModelTrial>& trials, const ModelSetup& setup);

// Where to predict: another bandwidth (a multiple of the calibrated one) or node count.
struct Scenario {
  double bandwidth_scale = 1;  // link rate / the calibration link's rate
  int nnodes = 0;              // 0: the calibration's
  int nproc_per_node = 0;      // 0: the calibration's
};

// The config's flow count (flows.h) on the model's nodes, or on the scenario's.
int flows_of(const StepModel& model, const CommConfig& config, const Scenario& scenario = {});
// The link fit the config is predicted with: its flow count's fit for its algorithm, else its flow
// count's pooled fit; nullptr when no trial of its flow count calibrated the link.
const LinkFit* link_fit_for(const StepModel& model, const CommConfig& config, const Scenario& scenario = {});

// Issue 36's rule, for every driver of a search (the model strategy offline, the online driver): a
// config whose flow count no trial calibrated the link for cannot be forecast nor bounded (one flow's
// rate says nothing of two flows' on a link capped per flow), so it must be measured before anything
// is pruned or stopped on a forecast or a bound. predict() refuses such a config (why_not says so);
// the model strategy (strategy.h) measures every point it cannot forecast before the others.
bool flow_count_unmeasured(const StepModel& model, const CommConfig& config);

// False when a flow count's fit shows less bandwidth than a smaller flow count's, by more than
// kReliableLinkError: more flows never carry less on a link, so something else (a loaded CPU) sets the
// communication times, and no forecast is reliable (the model strategy then only orders).
bool links_consistent(const StepModel& model);

// The ok trials of a stored session, as the model reads them (unreadable ones are left out).
std::vector<ModelTrial> model_trials(const std::vector<TrialRecord>& records);
// The model of a stored session.
StepModel session_model(const Store& store, const SessionRecord& session);

struct Prediction {
  bool ok = false;
  std::string why_not;  // !ok: what is missing (no compute-only trial, no probe data, ...)
  double step_s = 0;
  double bound_s = 0;
  double comm_s = 0;    // modelled communication time per step
  double wire_s = 0;    // wire bytes / bandwidth
  double compression_s = 0;  // K in the bound: PowerSGD's own compute per step (0: none or not measured)
  double cpu_floor_s = 0;    // F: the config's CPU floor (0: none measured)
  int64_t wire_bytes = 0;
  int flows = 0;               // the config's flow count (flows.h)
  bool head_measured = false;  // the config was measured (else its head is borrowed)
  bool reliable = false;       // the link fit explains its samples within kReliableLinkError, and
                               // the flow counts' fits agree with a link (links_consistent)
};

Prediction predict(const StepModel& model, const CommConfig& config, const Scenario& scenario = {});

// The measured config equal to `config`, or nullptr.
const MeasuredConfig* find_measured(const StepModel& model, const CommConfig& config);

// The wire fraction of a compression (fp16/bf16: 0.5); nullopt for powersgd, whose bytes follow
// the matrices' shapes (gradient_layout.h), not the payload.
std::optional<double> wire_fraction(Compression compression);

}  // namespace acspeed::tuner
