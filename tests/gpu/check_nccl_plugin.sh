#!/usr/bin/env bash
# GPU check: NCCL loads libnccl-tuner-acspeed.so and follows its rules (run by tests/gpu/run.sh).
#
# Stage 1, one process, single-rank NCCL process group, DDP steps: NCCL loads the plugin, the plugin
#   reads ACSPEED_NCCL_RULES, and acspeed_nccl_tuner_set_rules called through ctypes reaches the
#   instance NCCL loaded (its log line comes out through NCCL's own logger).
#   A single-rank communicator never asks the tuner (NCCL copies locally), hence stage 2:
# Stage 2, two processes sharing the one GPU and posing as two nodes (NCCL_HOSTID differs, NCCL's
#   socket transport over loopback): NCCL's per-collective "Algo X proto Y" lines must follow the
#   rules file, then the rules switched through the setter, which swap the algorithm per size. The
#   file's large-message rule also sets a chunk size: NCCL >= 2.30 (tuner ABI v6) asks the plugin for
#   it, older NCCL (v5) never does, and the plugin says once that it is ignored.
#   DDP results must agree across ranks. Skipped when the GPU is in an exclusive compute mode.
#
# Uses the plugin built on the CPU machine and carried here (the GPU machine lacks fmt and
# nlohmann_json): $ACSPEED_NCCL_PLUGIN, default the installed wheel's (run.sh installs it), else
# the checkout's python/acspeed/libnccl-tuner-acspeed.so.
# Python: $ACSPEED_PYTHON, default python3 (needs torch with CUDA). Exit 0 pass, 77 skip, else fail.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
python=${ACSPEED_PYTHON:-python3}
logs=${ACSPEED_GPU_LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/acspeed-nccl-plugin.XXXXXX")}
mkdir -p "$logs"
work=$(mktemp -d "${TMPDIR:-/tmp}/acspeed-nccl-plugin-work.XXXXXX")
trap 'rm -rf "$work"' EXIT

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$repo/tests/gpu/lib.sh"

require_gpu
report_acspeed
plugin=${ACSPEED_NCCL_PLUGIN:-$repo/python/acspeed/libnccl-tuner-acspeed.so}
if [[ -z "${ACSPEED_NCCL_PLUGIN:-}" ]] && wheel_installed; then
  plugin=$ACSPEED_GPU_SITE/acspeed/libnccl-tuner-acspeed.so
fi
[[ -f "$plugin" ]] || fail "$plugin not found. Build it on the CPU machine (ninja -C build acspeed_nccl_tuner)" \
  "and carry python/acspeed/libnccl-tuner-acspeed.so along (tests/gpu/README.md)"
plugin=$(cd "$(dirname "$plugin")" && pwd)/$(basename "$plugin")
((${#plugin} < 255)) || fail "NCCL_TUNER_PLUGIN must be shorter than 255 bytes: $plugin"
"$python" -c "import ctypes, sys; ctypes.CDLL(sys.argv[1]).acspeed_nccl_tuner_set_rules" "$plugin" 2>"$work/load.err" ||
  fail "the plugin does not load here (glibc too old?): $(cat "$work/load.err")"
pass "the plugin loads and exports acspeed_nccl_tuner_set_rules: $plugin"
require_cuda_torch
echo "torch $("$python" -c 'import torch; print(torch.__version__, "NCCL", ".".join(map(str, torch.cuda.nccl.version())))')"
abi=$(nccl_tuner_abi) || exit 1

# Phase A (rules file): small allreduces tree/LL on 1 channel, large ones ring/Simple on 2 in chunks
# of 256 KiB. Phase B (setter): the other way round, NCCL's chunks. The worker probes 4 KiB + 1 MiB
# in A, 8 KiB + 2 MiB in B.
rules() {
  printf '{"version": 1, "nccl_rules": [
  {"collective": "allreduce", "min_bytes": 0, "max_bytes": 65536, "algorithm": "%s", "protocol": "ll", "channels": 1},
  {"collective": "allreduce", "min_bytes": 65536, "max_bytes": 1073741824, "algorithm": "%s", "protocol": "simple", "channels": 2%s}]}\n' \
    "$1" "$2" "$3"
}
rules tree ring ', "chunk_bytes": 262144' >"$work/rules_a.json"
rules ring tree "" >"$work/rules_b.json"

# Runs the worker as RANK $1 of $2 with NCCL's log in $logs/$3.rank$1.nccl.log, for at most
# $worker_timeout seconds (set per stage, below the check's cap); further arguments are extra
# VAR=value settings.
worker() {
  local rank=$1 world=$2 stage=$3 port=$4
  timeout --kill-after=5 "$worker_timeout" env RANK="$rank" WORLD_SIZE="$world" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
    NCCL_TUNER_PLUGIN="$plugin" ACSPEED_NCCL_RULES="$work/rules_a.json" \
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING NCCL_DEBUG_FILE="$logs/$stage.rank$rank.nccl.log" \
    "${@:5}" \
    "$python" "$repo/tests/gpu/nccl_plugin_ddp.py" --plugin "$plugin" --switch-to "$work/rules_b.json" \
    >"$logs/$stage.rank$rank.out" 2>&1
}
expect_line() {  # file, fixed text, what it proves
  grep -qF -- "$2" "$1" || fail "$3: no line with '$2' in $1 (see $logs)"
  pass "$3"
}

echo "--- stage 1: one process, single-rank NCCL process group"
worker_timeout=$(worker_limit "${ACSPEED_NCCL_WORKER_TIMEOUT:-25}" 10 "stage 1") || exit 1
worker 0 1 stage1 "$(free_port)" || fail "the single-rank DDP worker failed: $(tail -5 "$logs/stage1.rank0.out")"
log=$logs/stage1.rank0.nccl.log
expect_line "$log" "TUNER/Plugin: Using acspeed (v$abi)" "NCCL loaded the plugin through tuner ABI v$abi"
expect_line "$log" "TUNER/acspeed: 2 rule(s) from rules file '$work/rules_a.json'" "the plugin read ACSPEED_NCCL_RULES"
expect_line "$log" "(1 ranks, 1 nodes): 2 rule(s)" "the communicator got the rules"
expect_line "$log" "NCCL INFO TUNER/acspeed: 2 rule(s) from acspeed_nccl_tuner_set_rules: [0] allreduce [0, 65536) -> ring/ll" \
  "the ctypes setter reached NCCL's instance of the plugin"
expect_line "$log" "acspeed_nccl_tuner_set_rules refused the config" "a bad config was refused and logged"
expect_line "$logs/stage1.rank0.out" "ACSPEED_CHECK rank 0: phase B DDP step 1 loss" "single-rank DDP steps ran"

echo "--- stage 2: two processes on one GPU posing as two nodes"
worker_timeout=$(worker_limit "${ACSPEED_NCCL_WORKER_TIMEOUT:-45}" 15 "stage 2") || exit 1
run_two_emulated_nodes stage2
rc=$?
((two_nodes_skipped == 0)) || exit 0
((rc != 124 && rc != 137)) || fail "a two-rank worker timed out after ${worker_timeout}s (stage 1 passed;" \
  "two processes time-slicing one GPU may be too slow here: raise ACSPEED_NCCL_WORKER_TIMEOUT)"
((rc == 0)) || fail "a two-rank worker failed (exit $rc): $(tail -3 "$logs"/stage2.rank*.out)"
log=$logs/stage2.rank0.nccl.log
expect_line "$log" "(2 ranks, 2 nodes): 2 rule(s)" "NCCL sees two nodes"
# Every NCCL choice for a probed size must be the rule's; each size must have been seen.
for expect in "4096 TREE LL" "1048576 RING SIMPLE" "8192 RING LL" "2097152 TREE SIMPLE"; do
  read -r bytes algo proto <<<"$expect"
  seen=$(grep -o "AllReduce: $bytes Bytes -> Algo [A-Z_]* proto [A-Z0-9]* channel{Lo..Hi}={[0-9]*..[0-9]*}" "$log" | sort | uniq -c)
  [[ -n "$seen" ]] || fail "NCCL logged no allreduce of $bytes bytes in $log"
  echo "$seen"
  if grep -q "AllReduce: $bytes Bytes -> Algo" "$log" &&
     grep "AllReduce: $bytes Bytes -> Algo" "$log" | grep -qv "Algo $algo proto $proto "; then
    fail "NCCL did not follow the rule for $bytes bytes (wanted $algo/$proto)"
  fi
  pass "allreduce of $bytes bytes ran as $algo/$proto"
done
expect_line "$log" "first applied to allreduce" "the plugin logged its first rule use"
if ((abi >= 6)); then
  expect_line "$log" "first set the chunk size of allreduce of 1048576 bytes" "the chunk rule set NCCL's chunk size (v6)"
else
  expect_line "$log" "this NCCL loaded tuner ABI v5, which has no getChunkSize" "the chunk rule was ignored, said once (v5)"
  (($(grep -c "no getChunkSize" "$log") == 1)) || fail "the ignored chunk rule was logged more than once in $log"
fi
for rank in 0 1; do
  expect_line "$logs/stage2.rank$rank.out" "ACSPEED_CHECK rank $rank: done" "rank $rank finished with equal replicas"
done
echo "nccl_plugin: passed"
