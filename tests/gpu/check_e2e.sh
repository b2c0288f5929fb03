#!/usr/bin/env bash
# GPU check: the product end to end, as a user runs it, on the one GPU (run by tests/gpu/run.sh).
#
# 1. acspeed-tune --share-gpus: 2 ranks sharing the GPU (device = local rank mod 1, an NCCL host
#    identity each), resnet18 on 64x64 images, a space of two configs: DDP's defaults and the same
#    with one NCCL rule (algorithm tree), grid strategy, 3 decision pairs. The plan must say the GPUs
#    are shared, and the stored decision must be keyed and labelled so.
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

echo "--- 1. acspeed-tune: 2 ranks sharing the GPU, a space with one NCCL rule"
limit=$(worker_limit 110 60 "the tuning session") || exit 1
tune_args=("${MODEL[@]}" --nproc-per-node 2 --share-gpus --warmup 3 --steps 10 --repeats 3 --bucket-mb 25
  --algorithms allreduce --streams 1 --nccl-algorithms "any,$RULE_ALGORITHM" --strategy grid --seed 1
  --trial-timeout 30 --budget-minutes "$(awk -v s="$limit" 'BEGIN { printf "%.2f", (s - 15) / 60 }')")
"$tune" tune "${tune_args[@]}" --dry-run >"$logs/tune-plan.txt" 2>&1 || fail "the dry run failed: $(tail -5 "$logs/tune-plan.txt")"
grep -q "share 1 GPU" "$logs/tune-plan.txt" || fail "the plan does not say that the ranks share the GPU: $(cat "$logs/tune-plan.txt")"
pass "the plan says the ranks share the GPU"
timeout --kill-after=5 "$limit" "$tune" tune "${tune_args[@]}" >"$logs/tune.out" 2>&1
rc=$?
case $rc in
  0) pass "acspeed-tune stored a decision" ;;
  124 | 137) fail "acspeed-tune ran past ${limit}s: $(tail -8 "$logs/tune.out")" ;;
  *) fail "acspeed-tune failed (exit $rc): $(tail -8 "$logs/tune.out")" ;;
esac

echo "--- 2. the decision in the store"
"$tune" report --format json -o "$logs/report.json" >/dev/null 2>&1 || fail "acspeed-tune report failed"
"$tune" configs export --active -o "$work/active.json" || fail "acspeed-tune configs export failed"
steps=$repo/tests/gpu/e2e_steps.py
"$python" "$steps" decision "$logs/report.json" "$work/active.json" "$work/import.json" "$RULE_ALGORITHM" \
  >"$work/decision.txt" || fail "the stored decision is not what was tuned ($logs/report.json)"
cat "$work/decision.txt"
path=$(tail -1 "$work/decision.txt")
if [[ "$path" == imported ]]; then
  "$tune" configs import "$work/import.json" || fail "configs import of the searched config failed"
  pass "path: imported (the tuner kept DDP defaults; the searched config with the NCCL rule is now active)"
else
  pass "path: tuned (the decision itself carries the NCCL rule)"
fi
"$tune" configs list >"$logs/configs.txt" 2>&1
cat "$logs/configs.txt"

echo "--- 3. the seed benchmark with import acspeed, 2 ranks sharing the GPU"
limit=$(worker_limit 60 25 "the benchmark") || exit 1
timeout --kill-after=5 "$limit" env ACSPEED_SHARE_GPUS=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING \
  NCCL_DEBUG_FILE="$logs/bench.%p.nccl.log" \
  "$python" -m torch.distributed.run --nnodes 1 --node_rank 0 --nproc_per_node 2 --master_addr 127.0.0.1 \
  --master_port "$(free_port)" "$example" "${MODEL[@]}" --warmup 5 --steps 20 --profile \
  --json "$logs/bench.json" >"$logs/bench.out" 2>&1 ||
  fail "the benchmark failed or ran past ${limit}s: $(tail -8 "$logs/bench.out")"
grep -E '(^|: )acspeed: applied decision #[0-9]+ ' "$logs/bench.out" || fail "no 'applied decision' line from acspeed"
grep -E '(^|: )2 GPUs -- 1M/2G: p50: [0-9.]+s [0-9]+/s p75: [0-9.]+s [0-9]+/s p90: [0-9.]+s [0-9]+/s p95: [0-9.]+s [0-9]+/s$' \
  "$logs/bench.out" || fail "no p50..p95 line: $(tail -5 "$logs/bench.out")"
pass "acspeed applied the decision; the benchmark printed its line"

echo "--- 4. NCCL's log: the plugin loaded, its rule followed"
mapfile -t nccl_logs < <(grep -l "TUNER/Plugin: Using acspeed" "$logs"/bench.*.nccl.log 2>/dev/null)
((${#nccl_logs[@]} == 2)) || fail "NCCL loaded the plugin in ${#nccl_logs[@]} of 2 ranks (see $logs/bench.*.nccl.log)"
grep -ho "TUNER/Plugin: Using acspeed (v[0-9]*)" "${nccl_logs[@]}" | sort | uniq -c
abi=$(nccl_tuner_abi) || exit 1
for log in "${nccl_logs[@]}"; do
  grep -q "TUNER/Plugin: Using acspeed (v$abi)" "$log" || fail "NCCL did not load the plugin's v$abi interface in $log"
done
pass "NCCL loaded the plugin (v$abi: NCCL >= 2.30 asks for v6 first, older NCCL for v5) on both ranks"
for log in "${nccl_logs[@]}"; do
  "$python" "$steps" nccl "$log" "$RULE_ALGORITHM" || fail "NCCL did not follow the rule ($RULE_ALGORITHM) in $log"
done
pass "NCCL followed the rule: every allreduce ran as ${RULE_ALGORITHM^^}"

echo "--- 5. the CUPTI breakdown"
"$python" "$steps" cupti "$logs/bench.json" || fail "the CUPTI breakdown is not as expected (see $logs/bench.json)"
pass "NCCL kernels counted as communication; exposed communication below the step"
echo "e2e: passed (path: $path)"
