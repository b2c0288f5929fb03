#!/usr/bin/env bash
# GPU check: acspeed's own comm hook on NCCL (run by tests/gpu/run.sh), on every NCCL process group
# the torch has (torch 2.15: nccl2, then the classic group through TORCH_DIST_USE_NCCL2=0; torch 2.11:
# the classic group, and it says "nccl2: not in this torch").
#
# Two processes share the one GPU and pose as two nodes (tests/gpu/lib.sh: NCCL_HOSTID differs,
# NCCL's socket transport over loopback). The worker (hook_ddp.py) trains each algorithm (allreduce
# and hierarchical on 2 streams, reduce_scatter on 1), and allreduce x 2 streams x fp16, with
# acspeed's hook and with plain DDP (or torch's fp16 compress hook) from the same start, and profiles
# two steps with torch.profiler. Passes when, on
# both ranks and for every config: the parameters are bit for bit the reference's; NCCL kernels
# overlapped compute kernels; NCCL kernels ran on one stream per lane and, with two lanes, both
# lanes' kernels were in flight at once; no host synchronisation happened inside backward (one per
# step allowed with the non-finite fallback); and nothing deadlocked (each worker runs under a time
# limit). acspeed._probes (kernel_overlap) is built here stand-alone, as for check_cupti.sh.
# The engine before this check (synchronous collectives issued by lane threads on the compute
# stream) fails it: its NCCL kernels share one stream with compute, so they overlap neither compute
# nor each other. Skipped when the GPU is in an exclusive compute mode.
# Python: $ACSPEED_PYTHON (default python3, torch with CUDA). Exit 0 pass, 77 skip, else fail.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
python=${ACSPEED_PYTHON:-python3}
logs=${ACSPEED_GPU_LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/acspeed-hook.XXXXXX")}
mkdir -p "$logs"

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$repo/tests/gpu/lib.sh"

require_gpu
report_acspeed
read_nccl_process_groups
require_cuda_torch
build_probes "$logs/build.log"
echo "torch $("$python" -c 'import torch; print(torch.__version__, "NCCL", ".".join(map(str, torch.cuda.nccl.version())))')"

# Runs the worker as RANK $1 of $2 on port $4 ($3: the stage's name), for at most $worker_timeout seconds
# (below the check's cap); further arguments are VAR=value settings.
worker() {
  local rank=$1 world=$2 stage=$3 port=$4
  timeout --kill-after=5 "$worker_timeout" env RANK="$rank" WORLD_SIZE="$world" MASTER_ADDR=127.0.0.1 \
    MASTER_PORT="$port" ACSPEED_DISABLE=1 PYTHONPATH="$(worker_pythonpath)" "${@:5}" \
    "$python" "$repo/tests/gpu/hook_ddp.py" --out "$out" >"$logs/$stage.rank$rank.out" 2>&1
}

# Once per NCCL process group this torch has (torch 2.15: nccl2 and the classic group; 2.11: the
# classic one; read_nccl_process_groups above), each with its share of the time left; the workers say
# which implementation ran.
ran=()
for entry in "${groups[@]}"; do
  read -r use_nccl2 impl <<<"$entry"
  stage=hook-$impl
  out=$logs/$impl
  mkdir -p "$out"
  echo "--- $impl: two processes on one GPU posing as two nodes"
  share=$(((${ACSPEED_HOOK_WORKER_TIMEOUT:-40} * (${#groups[@]} - ${#ran[@]})) / ${#groups[@]}))
  worker_timeout=$(worker_limit "$((share < 15 ? 15 : share))" 15 "the two ranks on $impl") || exit 1
  if [[ "$use_nccl2" == - ]]; then
    run_two_emulated_nodes "$stage"
  else
    run_two_emulated_nodes "$stage" TORCH_DIST_USE_NCCL2="$use_nccl2"
  fi
  rc=$?
  ((two_nodes_skipped == 0)) || exit 77
  grep -h '^ACSPEED_CHECK' "$logs/$stage".rank*.out
  case $rc in
    0) ;;
    124 | 137) fail "$impl: a worker ran past ${worker_timeout}s (a deadlock?): $(tail -5 "$logs/$stage".rank*.out)" ;;
    *) fail "$impl: a worker found a problem or failed (exit $rc): $(tail -5 "$logs/$stage".rank*.out)" ;;
  esac
  for rank in 0 1; do
    [[ -f "$out/result-rank$rank.json" ]] || fail "$impl: rank $rank wrote no result"
    grep -q "^ACSPEED_CHECK rank $rank: process group $impl\$" "$logs/$stage.rank$rank.out" ||
      fail "rank $rank did not run on $impl: $(grep '^ACSPEED_CHECK.*process group' "$logs/$stage.rank$rank.out")"
  done
  ran+=("$impl")
  pass "$impl: every config: parameters equal the reference, NCCL overlapped compute, one stream per lane, lanes overlapped, no host sync in backward"
done
echo "hook: passed on ${ran[*]}"
