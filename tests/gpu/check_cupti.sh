#!/usr/bin/env bash
# GPU check: the CUPTI probe backend measures real DDP training steps (run by tests/gpu/run.sh).
#
# Build: probes/ on its own (cmake -S probes), because the GPU machine lacks Boost, fmt, SQLite,
#   GoogleTest and nlohmann_json: it compiles runtime/src/log.cc and takes fmt header-only from the
#   installed torch. Output: python/acspeed/_probes.<python-tag>.so. See tests/gpu/README_cupti.md.
# Stage 1, one process on the GPU (single-rank NCCL group, observed allreduce hook): StepProbe picks
#   the "cupti" backend, sees compute kernels in every step, no record is missing; then, with
#   torch.profiler running, a new StepProbe steps aside to the "cpu" backend and says why, and the
#   profiler still records CUDA kernels.
# Stage 2, two processes sharing the GPU and posing as two nodes (NCCL_HOSTID differs, NCCL's
#   socket transport over loopback), a communication-heavy model: NCCL kernels are classified as
#   communication, exposed communication > 0, and every bucket gets its NCCL time through the
#   external-correlation tags. Skipped when the GPU is in an exclusive compute mode.
# Python: $ACSPEED_PYTHON (default python3, torch with CUDA). Exit 0 pass, 77 skip, else fail.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
python=${ACSPEED_PYTHON:-python3}
logs=${ACSPEED_GPU_LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/acspeed-cupti.XXXXXX")}
mkdir -p "$logs"
work=$(mktemp -d "${TMPDIR:-/tmp}/acspeed-cupti-work.XXXXXX")
trap 'rm -rf "$work"' EXIT

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$repo/tests/gpu/lib.sh"

require_gpu
report_acspeed
require_cuda_torch
build_probes "$logs/build.log"

cat >"$work/worker.py" <<'PY'
import json, os, sys
import torch, torch.distributed as dist
sys.path.insert(0, os.path.join(os.environ["ACSPEED_REPO"], "tests", "probes"))
from probe_worker import observed_allreduce_hook  # the one minimal observed hook (tests/probes)
from acspeed.probes import StepProbe

stage, out = sys.argv[1], sys.argv[2]
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.cuda.set_device(0)
torch.manual_seed(0)
width, layers = (1024, 4) if stage == "stage1" else (4096, 4)  # stage 2: 268 MB of gradients
net = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)]).cuda()
model = torch.nn.parallel.DistributedDataParallel(net, device_ids=[0])
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
x = torch.randn(8, width, device="cuda")

def steps(probe, n):
    for _ in range(n):
        probe.step_begin()
        model(x).square().mean().backward()
        probe.backward_end()
        opt.step()
        opt.zero_grad(set_to_none=True)
        probe.step_end()

probe = StepProbe(model)
result = {"backend": probe.backend, "notes": probe.notes}
if probe.backend == "cupti":
    second = StepProbe(model)  # CUPTI has one set of buffer callbacks: the second one steps aside
    result.update(second_backend=second.backend, second_notes=second.notes)
    second.close()
    model.register_comm_hook(probe, observed_allreduce_hook)
    steps(probe, 3)
    probe.reset()
    steps(probe, 8)
    summary = probe.summary()
    print(StepProbe.format(summary), flush=True)
    result.update(summary=summary, per_step=probe.steps(),
                  parameter_bytes=sum(p.numel() * p.element_size() for p in model.parameters()))
probe.close()

if stage == "stage1":
    # With torch.profiler running, a new probe must step aside (and the profiler keep working).
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        side = StepProbe(model)
        steps(side, 2)
        result.update(profiled_backend=side.backend, profiled_notes=side.notes)
        side.close()
    result["profiler_cuda_events"] = sum(
        1 for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA or getattr(e, "device_time_total", 0) > 0)
if rank == 0:
    with open(out, "w") as f:
        json.dump(result, f)
dist.destroy_process_group()
PY

# Runs the worker as RANK $1 of $2 for stage $3 on port $4, for at most $worker_timeout seconds (set
# per stage, below the check's cap); further arguments are VAR=value settings.
worker() {
  local rank=$1 world=$2 stage=$3 port=$4
  timeout --kill-after=5 "$worker_timeout" env RANK="$rank" WORLD_SIZE="$world" MASTER_ADDR=127.0.0.1 \
    MASTER_PORT="$port" ACSPEED_DISABLE=1 ACSPEED_REPO="$repo" PYTHONPATH="$(worker_pythonpath)" "${@:5}" \
    "$python" "$work/worker.py" "$stage" "$logs/$stage.json" >"$logs/$stage.rank$rank.out" 2>&1
}
# Evaluates a Python expression over the stage's result `r`; fails with $3 unless it is true.
check() {
  "$python" - "$logs/$1.json" "$2" <<'PY' || fail "$3 ($2; see $logs)"
import json, sys
r = json.load(open(sys.argv[1]))
p50 = lambda key: next(row[key] for row in r["summary"]["rows"] if row["percentile"] == 50.0)
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
  pass "$3"
}

echo "--- stage 1: one process, single-rank NCCL group"
worker_timeout=$(worker_limit "${ACSPEED_CUPTI_WORKER_TIMEOUT:-20}" 10 "stage 1") || exit 1
worker 0 1 stage1 "$(free_port)" || fail "the stage 1 worker failed: $(tail -8 "$logs/stage1.rank0.out")"
cat "$logs/stage1.rank0.out"
check stage1 'r["backend"] == "cupti"' "the CUPTI backend was selected"
check stage1 'r["summary"]["steps"] == 8 and all(s["compute_ns"] > 0 for s in r["per_step"])' \
  "every step saw compute kernels"
check stage1 'not any("no activity records" in n for n in r["summary"]["notes"])' "CUPTI delivered records"
check stage1 'r["summary"]["unmatched_events"] == 0' "every bucket event matched a step"
check stage1 'r["second_backend"] == "cpu" and any("already tracing" in n for n in r["second_notes"])' \
  "a second probe in the same process stepped aside to the CPU backend"
check stage1 'r["profiled_backend"] == "cpu" and any("torch.profiler" in n or "subscriber" in n for n in r["profiled_notes"])' \
  "with torch.profiler running the probe stepped aside and said why"
check stage1 'r["profiler_cuda_events"] > 0' "torch.profiler still recorded CUDA kernels"

echo "--- stage 2: two processes on one GPU posing as two nodes"
worker_timeout=$(worker_limit "${ACSPEED_CUPTI_WORKER_TIMEOUT:-30}" 12 "stage 2") || exit 1
run_two_emulated_nodes stage2
rc=$?
((two_nodes_skipped == 0)) || exit 0
((rc == 0)) || fail "a stage 2 worker failed (exit $rc): $(tail -5 "$logs"/stage2.rank*.out)"
cat "$logs/stage2.rank0.out"
check stage2 'r["backend"] == "cupti"' "the CUPTI backend was selected (rank 0)"
check stage2 'p50("comm_s") > 0 and p50("exposed_comm_s") > 0' "NCCL kernels counted as communication, partly exposed"
check stage2 'p50("comm_s") >= p50("exposed_comm_s") and p50("wall_s") >= p50("compute_s")' "the breakdown is consistent"
check stage2 'sum(b["bytes"] for b in r["summary"]["buckets"]) == r["parameter_bytes"]' "bucket sizes add up to the gradients"
check stage2 'all(b["comm_s_p50"] > 0 for b in r["summary"]["buckets"])' \
  "every bucket got its NCCL kernel time through the external-correlation tags"
echo "cupti: passed"
