#!/usr/bin/env bash
# GPU check: the product end to end, as a user runs it, on the one GPU (run by tests/gpu/run.sh), on
# every NCCL process group the torch has (torch 2.15: nccl2, then the classic group through
# TORCH_DIST_USE_NCCL2=0; torch 2.11: the classic group, and it says "nccl2: not in this torch"):
# stages 1-2 tune once, on the first of them (nccl2 where present: what backend="nccl" builds in
# 2.15), and the report must say that implementation ran the workers; stages 3-5, the job with
# `import acspeed`, run on each, each with its share of the time left, and the benchmark's JSON must
# say which implementation ran it. The decision applies whatever the implementation (its key holds
# none), and a second tuning session would not fit in the check's cap; the hook on both is
# check_hook.sh's.
#
# 1. acspeed-tune --share-gpus: 2 ranks sharing the GPU (device = local rank mod 1, an NCCL host
#    identity each), resnet18 on 64x64 images, a space of two configs: DDP's defaults and the same
#    with one NCCL rule (algorithm tree), grid strategy, 3 decision pairs. The plan must say the GPUs
#    are shared, and the stored decision must be keyed and labelled so; the session must say the net
#    NCCL chose, read from NCCL's own INFO line ("Using network NAME").
# 2. The decision in the store. Two ranks time-slicing one GPU will likely keep DDP's defaults, which
#    stores no rule; then the searched config that carries the rule is imported (`configs import`,
#    with the decision's own key) and made active, so the plugin proof below never depends on a
#    noisy verdict. The check says which path ran ("tuned" or "imported").
# 3. examples/Pytorch_ddp_benchmark.py of the installed package under torch.distributed.run, 2 ranks,
#    `import acspeed` with ACSPEED_SHARE_GPUS=1, --profile: acspeed's "applied decision" line and the
#    seed's p50..p95 line.
# 4. NCCL's own log (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,TUNING): the plugin loaded (v6 under NCCL >= 2.30, else v5), its rule
#    was applied, and every allreduce after that ran with the rule's algorithm.
# 5. The CUPTI breakdown (--profile): backend cupti, NCCL kernels counted as communication, exposed
#    communication below the step.
# Every stage runs under a time limit below the check's cap (tests/gpu/lib.sh worker_limit). What
# reads the product's output is e2e_steps.py (tested on the CPU: tests/python/test_gpu_e2e_check.py).
# Python: $ACSPEED_PYTHON (default python3, torch with CUDA). Exit 0 pass, 77 skip, else fail.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
python=${ACSPEED_PYTHON:-python3}
logs=${ACSPEED_GPU_LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/acspeed-e2e.XXXXXX")}
mkdir -p "$logs"
work=$(mktemp -d "${TMPDIR:-/tmp}/acspeed-e2e-work.XXXXXX")
trap 'rm -rf "$work"' EXIT

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$repo/tests/gpu/lib.sh"

MODEL=(--model resnet18 --precision amp --batch-size 32 --image-size 64)
RULE_ALGORITHM=tree

require_gpu
report_acspeed
read_nccl_process_groups
export ACSPEED_PYTHON=$python  # acspeed-tune's workers
if wheel_installed; then
  tune=$ACSPEED_GPU_SITE/bin/acspeed-tune
  example=$ACSPEED_GPU_SITE/acspeed/examples/Pytorch_ddp_benchmark.py
else
  tune=$repo/build/bin/acspeed-tune
  example=$repo/examples/Pytorch_ddp_benchmark.py
fi
[[ -x "$tune" ]] || fail "no acspeed-tune at $tune"
[[ -f "$example" ]] || fail "no benchmark example at $example"
version=$("$tune" --version) || fail "$tune --version failed"
[[ "$version" == *", $python)" ]] ||
  fail "acspeed-tune would start its workers with another interpreter: $version (expected $python)"
pass "$version"
require_cuda_torch
export ACSPEED_DB=$work/acspeed.db PYTHONPATH
PYTHONPATH=$(worker_pythonpath)

# The settings that select a group's implementation ("-": torch's only NCCL group): $1 of a
# nccl_process_groups line, into the array $group_env.
select_group() {
  group_env=()
  [[ "$1" == - ]] || group_env=(TORCH_DIST_USE_NCCL2="$1")
}

read -r use_nccl2 tuned_on <<<"${groups[0]}"
select_group "$use_nccl2"
echo "--- 1. acspeed-tune on $tuned_on: 2 ranks sharing the GPU, a space with one NCCL rule"
limit=$(worker_limit 110 60 "the tuning session") || exit 1
tune_args=("${MODEL[@]}" --nproc-per-node 2 --share-gpus --warmup 3 --steps 10 --repeats 3 --bucket-mb 25
  --algorithms allreduce --streams 1 --nccl-algorithms "any,$RULE_ALGORITHM" --strategy grid --seed 1
  --trial-timeout 30 --budget-minutes "$(awk -v s="$limit" 'BEGIN { printf "%.2f", (s - 15) / 60 }')")
"$tune" tune "${tune_args[@]}" --dry-run >"$logs/tune-plan.txt" 2>&1 || fail "the dry run failed: $(tail -5 "$logs/tune-plan.txt")"
grep -q "share 1 GPU" "$logs/tune-plan.txt" || fail "the plan does not say that the ranks share the GPU: $(cat "$logs/tune-plan.txt")"
pass "the plan says the ranks share the GPU"
timeout --kill-after=5 "$limit" env "${group_env[@]}" "$tune" tune "${tune_args[@]}" >"$logs/tune.out" 2>&1
rc=$?
case $rc in
  0) pass "acspeed-tune stored a decision" ;;
  124 | 137) fail "acspeed-tune ran past ${limit}s: $(tail -8 "$logs/tune.out")" ;;
  *) fail "acspeed-tune failed (exit $rc): $(tail -8 "$logs/tune.out")" ;;
esac
# The session read the net NCCL chose from NCCL's own INFO line (tuner/include/acspeed/tuner/nccl_net.h).
grep -F "NCCL's net: NCCL's INFO line: Using network " "$logs/tune.out" ||
  fail "the session did not read NCCL's net from its INFO line: $(grep -F "NCCL's net" "$logs/tune.out")"
pass "the session read NCCL's net from NCCL's own INFO line"

echo "--- 2. the decision in the store"
"$tune" report --format json -o "$logs/report.json" >/dev/null 2>&1 || fail "acspeed-tune report failed"
"$tune" configs export --active -o "$work/active.json" || fail "acspeed-tune configs export failed"
steps=$repo/tests/gpu/e2e_steps.py
"$python" "$steps" decision "$logs/report.json" "$work/active.json" "$work/import.json" "$RULE_ALGORITHM" \
  >"$work/decision.txt" || fail "the stored decision is not what was tuned ($logs/report.json)"
cat "$work/decision.txt"
"$python" "$steps" group "$logs/report.json" "$tuned_on" || fail "the tuner's workers did not run on $tuned_on"
path=$(tail -1 "$work/decision.txt")
if [[ "$path" == imported ]]; then
  "$tune" configs import "$work/import.json" || fail "configs import of the searched config failed"
  pass "path: imported (the tuner kept DDP defaults; the searched config with the NCCL rule is now active)"
else
  pass "path: tuned (the decision itself carries the NCCL rule)"
fi
"$tune" configs list >"$logs/configs.txt" 2>&1
cat "$logs/configs.txt"

# Stages 3-5 on every group, each with its share of the time left; its logs in $logs/<implementation>/.
ran=()
for entry in "${groups[@]}"; do
  read -r use_nccl2 impl <<<"$entry"
  select_group "$use_nccl2"
  out=$logs/$impl
  mkdir -p "$out"
  echo "--- 3. $impl: the seed benchmark with import acspeed, 2 ranks sharing the GPU"
  share=$((($(budget_left) - 10) / (${#groups[@]} - ${#ran[@]})))
  limit=$(worker_limit "$((share < 60 ? share : 60))" 25 "the benchmark on $impl") || exit 1
  timeout --kill-after=5 "$limit" env "${group_env[@]}" ACSPEED_SHARE_GPUS=1 NCCL_DEBUG=INFO \
    NCCL_DEBUG_SUBSYS=INIT,TUNING NCCL_DEBUG_FILE="$out/bench.%p.nccl.log" \
    "$python" -m torch.distributed.run --nnodes 1 --node_rank 0 --nproc_per_node 2 --master_addr 127.0.0.1 \
    --master_port "$(free_port)" "$example" "${MODEL[@]}" --warmup 5 --steps 20 --profile \
    --json "$out/bench.json" >"$out/bench.out" 2>&1 ||
    fail "$impl: the benchmark failed or ran past ${limit}s: $(tail -8 "$out/bench.out")"
  grep -E '(^|: )acspeed: applied decision #[0-9]+ ' "$out/bench.out" || fail "$impl: no 'applied decision' line from acspeed"
  grep -E '(^|: )2 GPUs -- 1M/2G: p50: [0-9.]+s [0-9]+/s p75: [0-9.]+s [0-9]+/s p90: [0-9.]+s [0-9]+/s p95: [0-9.]+s [0-9]+/s$' \
    "$out/bench.out" || fail "$impl: no p50..p95 line: $(tail -5 "$out/bench.out")"
  "$python" "$steps" group "$out/bench.json" "$impl" || fail "the benchmark did not run on $impl"
  pass "$impl: acspeed applied the decision; the benchmark printed its line"

  echo "--- 4. $impl: NCCL's log: the plugin loaded, its rule followed"
  mapfile -t nccl_logs < <(grep -l "TUNER/Plugin: Using acspeed" "$out"/bench.*.nccl.log 2>/dev/null)
  ((${#nccl_logs[@]} == 2)) || fail "$impl: NCCL loaded the plugin in ${#nccl_logs[@]} of 2 ranks (see $out/bench.*.nccl.log)"
  grep -ho "TUNER/Plugin: Using acspeed (v[0-9]*)" "${nccl_logs[@]}" | sort | uniq -c
  abi=$(nccl_tuner_abi) || exit 1
  for log in "${nccl_logs[@]}"; do
    grep -q "TUNER/Plugin: Using acspeed (v$abi)" "$log" || fail "$impl: NCCL did not load the plugin's v$abi interface in $log"
  done
  pass "$impl: NCCL loaded the plugin (v$abi: NCCL >= 2.30 asks for v6 first, older NCCL for v5) on both ranks"
  for log in "${nccl_logs[@]}"; do
    "$python" "$steps" nccl "$log" "$RULE_ALGORITHM" || fail "$impl: NCCL did not follow the rule ($RULE_ALGORITHM) in $log"
  done
  pass "$impl: NCCL followed the rule: every allreduce ran as ${RULE_ALGORITHM^^}"

  echo "--- 5. $impl: the CUPTI breakdown"
  "$python" "$steps" cupti "$out/bench.json" || fail "$impl: the CUPTI breakdown is not as expected (see $out/bench.json)"
  pass "$impl: NCCL kernels counted as communication; exposed communication below the step"
  ran+=("$impl")
done
echo "e2e: passed on ${ran[*]} (tuned on $tuned_on, path: $path)"
