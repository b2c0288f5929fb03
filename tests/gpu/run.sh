#!/usr/bin/env bash
# Runs every GPU check (tests/gpu/check_*.sh) and exits non-zero if any of them fails.
# On a machine without a GPU it says so and exits 0 without running anything.
#
#   tests/gpu/run.sh                 # from anywhere; checks find the checkout from their own path
#
# Check protocol: a check is an executable `check_<name>.sh`; exit 0 = pass, 77 = skipped (it says
# why), anything else = fail. Each gets ACSPEED_GPU_LOG_DIR, a folder of its own for its logs, and
# runs under a time limit of ACSPEED_GPU_CHECK_TIMEOUT seconds (default 300).
# Logs go to $ACSPEED_GPU_LOG_DIR (default: $OUT/gpu-logs when OUT names a folder, as on the lent
# device machine, so the logs come back; else a new temporary folder). See tests/gpu/README.md.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
timeout_s=${ACSPEED_GPU_CHECK_TIMEOUT:-300}
if ! [[ "$timeout_s" =~ ^[1-9][0-9]*$ ]]; then
  echo "tests/gpu: ACSPEED_GPU_CHECK_TIMEOUT='$timeout_s' is not a positive number of seconds" >&2
  exit 2
fi

shopt -s nullglob
checks=("$here"/check_*.sh)
if ((${#checks[@]} == 0)); then
  echo "tests/gpu: no check_*.sh in $here" >&2
  exit 2
fi

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
if ((gpus == 0)); then
  echo "tests/gpu: no GPU here (nvidia-smi missing or lists none): ${#checks[@]} check(s) skipped"
  exit 0
fi

if [[ -n "${ACSPEED_GPU_LOG_DIR:-}" ]]; then
  logs=$ACSPEED_GPU_LOG_DIR
elif [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then
  logs=$OUT/gpu-logs
else
  logs=$(mktemp -d "${TMPDIR:-/tmp}/acspeed-gpu-logs.XXXXXX")
fi
mkdir -p "$logs"
echo "tests/gpu: $gpus GPU(s): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
echo "tests/gpu: ${#checks[@]} check(s), logs in $logs, ${timeout_s}s limit each"

failed=0
summary=()
for check in "${checks[@]}"; do
  name=$(basename "$check" .sh)
  name=${name#check_}
  mkdir -p "$logs/$name"
  echo "=== $name"
  start=$SECONDS
  ACSPEED_GPU_LOG_DIR="$logs/$name" timeout --kill-after=10 "$timeout_s" bash "$check" 2>&1 |
    tee "$logs/$name/output.txt"
  rc=${PIPESTATUS[0]}
  elapsed=$((SECONDS - start))
  case $rc in
    0) result=pass ;;
    77) result=skipped ;;
    124 | 137) result="FAIL (timed out after ${timeout_s}s)"; failed=1 ;;
    *) result="FAIL (exit $rc)"; failed=1 ;;
  esac
  summary+=("$(printf '%-24s %6ss  %s' "$name" "$elapsed" "$result")")
done

echo
printf '%-24s %7s  %s\n' "check" "time" "result"
printf '%s\n' "${summary[@]}"
if ((failed)); then
  echo "tests/gpu: FAILED (logs in $logs)"
  exit 1
fi
echo "tests/gpu: all checks passed or skipped"
