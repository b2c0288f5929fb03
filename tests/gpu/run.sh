#!/usr/bin/env bash
# Runs every GPU check (tests/gpu/check_*.sh) and exits non-zero if any of them fails.
# On a machine without a GPU it says so and exits 0 without running anything.
#
#   tests/gpu/run.sh                 # from anywhere; checks find the checkout from their own path
#
# The acspeed under test is a wheel built on the CPU machine for this machine's Python and carried
# here ($ACSPEED_WHEEL, else the one dist/acspeed-*-cpXY-*.whl of the checkout for the Python of
# $ACSPEED_PYTHON, default python3): it is installed into a fresh venv that reuses this machine's
# torch (--system-site-packages, --no-index: nothing is downloaded or built), and every check runs
# with that venv's interpreter (ACSPEED_PYTHON) and the package installed there. Without a wheel
# the checks use the checkout (and build acspeed._probes on their own).
#
# Check protocol: a check is an executable `check_<name>.sh`; exit 0 = pass, 77 = skipped (it says
# why), anything else = fail. Each gets ACSPEED_GPU_LOG_DIR, a folder of its own for its logs, and
# runs under a time limit of ACSPEED_GPU_CHECK_TIMEOUT seconds (default 140), cut to what is left
# of the whole run's ACSPEED_GPU_RUN_TIMEOUT (default 450: the run ends within 8 minutes).
# Logs go to $ACSPEED_GPU_LOG_DIR (default: a new temporary folder) and are packed into one archive,
# $ACSPEED_GPU_ARCHIVE (default: $OUT/acspeed-gpu-logs.tar.gz when OUT names a folder, as on the
# lent device machine, so the archive comes back; else beside the log folder). See tests/gpu/README.md.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
timeout_s=${ACSPEED_GPU_CHECK_TIMEOUT:-140}
run_timeout_s=${ACSPEED_GPU_RUN_TIMEOUT:-450}
for setting in "ACSPEED_GPU_CHECK_TIMEOUT=$timeout_s" "ACSPEED_GPU_RUN_TIMEOUT=$run_timeout_s"; do
  if ! [[ "${setting#*=}" =~ ^[1-9][0-9]*$ ]]; then
    echo "tests/gpu: ${setting%%=*}='${setting#*=}' is not a positive number of seconds" >&2
    exit 2
  fi
done

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

logs=${ACSPEED_GPU_LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/acspeed-gpu-logs.XXXXXX")}
mkdir -p "$logs"
if [[ -n "${ACSPEED_GPU_ARCHIVE:-}" ]]; then
  archive=$ACSPEED_GPU_ARCHIVE
elif [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then
  archive=$OUT/acspeed-gpu-logs.tar.gz
else
  archive=$logs.tar.gz
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/acspeed-gpu-work.XXXXXX")  # the venv: not part of the logs
# Packs the logs, whatever the outcome (the exit status is kept).
pack() {
  local rc=$?
  tar -czf "$archive" -C "$(dirname "$logs")" "$(basename "$logs")" && echo "tests/gpu: logs packed into $archive"
  rm -rf "$work"
  exit "$rc"
}
trap pack EXIT
echo "tests/gpu: $gpus GPU(s): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"

# The carried wheel, installed into a venv of its own.
python=${ACSPEED_PYTHON:-python3}
tag=$("$python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])') || { echo "tests/gpu: $python does not run" >&2; exit 2; }
wheel=${ACSPEED_WHEEL:-}
if [[ -z "$wheel" ]]; then
  wheels=("$repo"/dist/acspeed-*-"$tag"-"$tag"-*.whl)
  ((${#wheels[@]} <= 1)) || { echo "tests/gpu: several $tag wheels in $repo/dist; name one with ACSPEED_WHEEL" >&2; exit 2; }
  wheel=${wheels[0]:-}
fi
if [[ -n "$wheel" ]]; then
  [[ -f "$wheel" ]] || { echo "tests/gpu: ACSPEED_WHEEL=$wheel is not a file" >&2; exit 2; }
  venv=$work/venv
  mkdir -p "$logs/install"
  if ! { "$python" -m venv --system-site-packages "$venv" &&
         "$venv/bin/python" -m pip install --no-index --no-deps --ignore-installed --disable-pip-version-check "$wheel" &&
         (cd /tmp && "$venv/bin/python" -c 'import acspeed._core, acspeed._probes; print("acspeed at", acspeed.__path__[0])'); } \
       >"$logs/install/output.txt" 2>&1; then
    echo "tests/gpu: installing $wheel failed:"; tail -15 "$logs/install/output.txt"
    exit 1
  fi
  tail -1 "$logs/install/output.txt"
  export ACSPEED_PYTHON=$venv/bin/python ACSPEED_GPU_INSTALLED=1
  echo "tests/gpu: installed $(basename "$wheel") into $venv"
else
  echo "tests/gpu: no $tag wheel (ACSPEED_WHEEL, $repo/dist): the checks use the checkout"
fi
echo "tests/gpu: ${#checks[@]} check(s), logs in $logs, ${timeout_s}s limit each, ${run_timeout_s}s in all"

failed=0
summary=()
for check in "${checks[@]}"; do
  name=$(basename "$check" .sh)
  name=${name#check_}
  mkdir -p "$logs/$name"
  echo "=== $name"
  start=$SECONDS
  limit=$((run_timeout_s - SECONDS - 10))  # 10 s for the kill and the packing
  ((limit < timeout_s)) || limit=$timeout_s
  if ((limit < 1)); then
    summary+=("$(printf '%-24s %6ss  %s' "$name" 0 "FAIL (not run: the ${run_timeout_s}s of the run were spent)")")
    failed=1
    continue
  fi
  ACSPEED_GPU_LOG_DIR="$logs/$name" timeout --kill-after=5 "$limit" bash "$check" 2>&1 |
    tee "$logs/$name/output.txt"
  rc=${PIPESTATUS[0]}
  elapsed=$((SECONDS - start))
  case $rc in
    0) result=pass ;;
    77) result=skipped ;;
    124 | 137) result="FAIL (timed out after ${limit}s)"; failed=1 ;;
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
