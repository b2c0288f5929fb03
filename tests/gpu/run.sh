#!/usr/bin/env bash
# Runs every GPU check (tests/gpu/check_*.sh) and exits non-zero if any of them fails.
#
#   tests/gpu/run.sh [--dry-run] [--checkout]
#
# --dry-run   checks the input, prints what would be installed and each step's time budget, runs nothing
# --checkout  test the checkout's python/ instead of a carried wheel (it must hold the compiled modules)
#
# The acspeed under test is a wheel built on the CPU machine for this machine's Python and carried
# here (scripts/gpu_wheel.sh): $ACSPEED_WHEEL, else the one dist/acspeed-*-cpXY-cpXY-*.whl of the
# checkout for the Python of $ACSPEED_PYTHON (default python3, the interpreter that holds torch). It
# is installed with that interpreter's pip into a folder of this run (`pip install --target`, no index,
# no dependencies: nothing downloaded or built) that goes in front of PYTHONPATH, and removed at the
# end: nothing is left in the interpreter's environment. Every check runs with that interpreter.
#
# Bad input (an unknown argument, a budget that is not a number of seconds, several wheels for this
# Python, a wheel for another Python, no wheel without --checkout) is refused with one line and exit
# status 2, before any GPU work. On a machine without a GPU it then says so and exits 0.
#
# Time: each step has its own cap, in priority order (BUDGETS below; --dry-run prints them); the
# checks run in that order, each only if its whole cap still fits in ACSPEED_GPU_RUN_TIMEOUT (else it
# is reported as not run). A check is killed at its cap (ACSPEED_GPU_CHECK_BUDGET tells it the cap,
# so its workers' own timeouts end first, with their diagnosis); then every process it started, its
# NCCL ranks included (which run in sessions of their own), is ended by id before the next check.
#
# Check protocol: a check is an executable `check_<name>.sh`; exit 0 = pass, 77 = skipped (it says
# why), anything else = fail. Each gets ACSPEED_GPU_LOG_DIR, a folder of its own for its logs.
# Logs are packed into one archive, $ACSPEED_GPU_ARCHIVE (default: $OUT/acspeed-gpu-logs.tar.gz
# when OUT names a folder, as on the lent device machine, beside the summary
# $OUT/acspeed-gpu-summary.txt, which names the GPU first; else beside the log folder). See
# tests/gpu/README.md.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

# Caps in seconds, in priority order: the order the checks run in. A check not listed runs after
# these with ACSPEED_GPU_CHECK_TIMEOUT (default 60); ACSPEED_GPU_CHECK_TIMEOUT, when set, is every
# check's cap.
BUDGETS=(nccl_plugin=60 e2e=180 cupti=45 hook=45)
DEFAULT_CHECK_CAP=60
KILL_GRACE=3     # after a cap: SIGTERM, then SIGKILL this much later
PACK_RESERVE=10  # kept at the end of the run for ending leftovers and packing the logs
DEVICE_TIMEOUT=420

refuse() { echo "tests/gpu: $*" >&2; exit 2; }
positive() {  # name value
  [[ "$2" =~ ^[1-9][0-9]*$ ]] || refuse "$1='$2' is not a positive number of seconds"
}

dry_run=0
checkout=0
for arg in "$@"; do
  case $arg in
    --dry-run) dry_run=1 ;;
    --checkout) checkout=1 ;;
    -h | --help) sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) refuse "unknown argument '$arg' (accepted: --dry-run, --checkout)" ;;
  esac
done

run_timeout_s=${ACSPEED_GPU_RUN_TIMEOUT:-400}
install_cap=${ACSPEED_GPU_INSTALL_TIMEOUT:-45}  # pip, then the first import of torch (cold caches)
positive ACSPEED_GPU_RUN_TIMEOUT "$run_timeout_s"
positive ACSPEED_GPU_INSTALL_TIMEOUT "$install_cap"
if [[ -n "${ACSPEED_GPU_CHECK_TIMEOUT:-}" ]]; then
  positive ACSPEED_GPU_CHECK_TIMEOUT "$ACSPEED_GPU_CHECK_TIMEOUT"
fi

# The checks in priority order, with their caps.
shopt -s nullglob
declare -A cap_of=()
order=()
for entry in "${BUDGETS[@]}"; do
  name=${entry%%=*}
  if [[ -f "$here/check_$name.sh" ]]; then
    order+=("$name")
    cap_of[$name]=${ACSPEED_GPU_CHECK_TIMEOUT:-${entry#*=}}
  fi
done
for check in "$here"/check_*.sh; do
  name=$(basename "$check" .sh)
  name=${name#check_}
  if [[ -z "${cap_of[$name]:-}" ]]; then
    order+=("$name")
    cap_of[$name]=${ACSPEED_GPU_CHECK_TIMEOUT:-$DEFAULT_CHECK_CAP}
  fi
done
((${#order[@]} > 0)) || refuse "no check_*.sh in $here"

# The interpreter with torch, and the wheel for its Python.
python=${ACSPEED_PYTHON:-python3}
tag=$("$python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])' 2>/dev/null) ||
  refuse "ACSPEED_PYTHON=$python does not run (name the interpreter that holds torch)"
wheel_tag() {  # the Python tag of a wheel file name: acspeed-0.1.0-cp312-cp312-linux_x86_64.whl -> cp312
  local parts
  IFS=- read -r -a parts <<<"$(basename "$1" .whl)"
  echo "${parts[${#parts[@]} - 3]:-?}"
}
wheel=${ACSPEED_WHEEL:-}
if ((checkout)); then
  [[ -z "$wheel" ]] || refuse "--checkout tests the checkout; ACSPEED_WHEEL=$wheel names a wheel: give one of them"
elif [[ -n "$wheel" ]]; then
  [[ -f "$wheel" ]] || refuse "ACSPEED_WHEEL=$wheel is not a file"
  [[ "$(wheel_tag "$wheel")" == "$tag" ]] ||
    refuse "ACSPEED_WHEEL=$wheel is a $(wheel_tag "$wheel") wheel; $python is $tag (build one with scripts/gpu_wheel.sh)"
else
  mine=("$repo"/dist/acspeed-*-"$tag"-"$tag"-*.whl)
  all=("$repo"/dist/acspeed-*.whl)
  if ((${#mine[@]} > 1)); then
    refuse "${#mine[@]} $tag wheels in $repo/dist ($(for w in "${mine[@]}"; do printf '%s ' "$(basename "$w")"; done)); keep one or name it with ACSPEED_WHEEL"
  elif ((${#mine[@]} == 0 && ${#all[@]} > 0)); then
    refuse "no $tag wheel in $repo/dist, only $(for w in "${all[@]}"; do printf '%s ' "$(wheel_tag "$w")"; done)for $python: build one with scripts/gpu_wheel.sh"
  elif ((${#mine[@]} == 0)); then
    refuse "no $tag wheel in $repo/dist (build it with scripts/gpu_wheel.sh and carry dist/), or pass --checkout to test the checkout"
  fi
  wheel=${mine[0]}
fi

if ((dry_run)); then
  echo "tests/gpu: dry run: nothing installed, nothing run"
  echo "interpreter: $python ($tag)"
  if ((checkout)); then echo "acspeed: the checkout's $repo/python (--checkout)"; else echo "wheel: $wheel"; fi
  echo "budget, seconds, in the order the steps run (each its own cap; the run within ${run_timeout_s}s):"
  used=$((install_cap + KILL_GRACE))
  printf '  %-14s %5s  (+%ss)\n' install "$install_cap" "$KILL_GRACE"
  for name in "${order[@]}"; do
    cap=${cap_of[$name]}
    if ((used + cap + KILL_GRACE > run_timeout_s - PACK_RESERVE)); then
      printf '  %-14s %5s  not run: does not fit in the %ss of the run\n' "$name" "$cap" "$run_timeout_s"
      continue
    fi
    used=$((used + cap + KILL_GRACE))
    printf '  %-14s %5s  (+%ss)\n' "$name" "$cap" "$KILL_GRACE"
  done
  printf '  %-14s %5s\n' "end+pack" "$PACK_RESERVE" "total, at most" "$((used + PACK_RESERVE))"
  echo "  (+${KILL_GRACE}s: from a cap's SIGTERM to SIGKILL; then its leftover processes are ended by id)"
  echo "device call: run(command=\"tests/gpu/run.sh\", carry=[\"dist\"], timeout_s=$DEVICE_TIMEOUT)"
  exit 0
fi

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
if ((gpus == 0)); then
  echo "tests/gpu: no GPU here (nvidia-smi missing or lists none): ${#order[@]} check(s) skipped"
  exit 0
fi

logs=${ACSPEED_GPU_LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/acspeed-gpu-logs.XXXXXX")}
mkdir -p "$logs"
summary_file=
if [[ -n "${ACSPEED_GPU_ARCHIVE:-}" ]]; then
  archive=$ACSPEED_GPU_ARCHIVE
elif [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then
  archive=$OUT/acspeed-gpu-logs.tar.gz
  summary_file=$OUT/acspeed-gpu-summary.txt
else
  archive=$logs.tar.gz
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/acspeed-gpu-work.XXXXXX")  # the installed wheel: not part of the logs
run_id="$$-$RANDOM"

# Ends, by id, every process that still carries check $1's marker in its environment (a cut-off
# check's NCCL ranks run in sessions of their own and outlive its process group); says which.
end_leftovers() {
  local marker="ACSPEED_GPU_CHECK_ID=$run_id-$1" pids=() files=() file pid round
  for round in 1 2 3; do
    pids=()
    mapfile -t files < <(grep -lzxF -- "$marker" /proc/[0-9]*/environ 2>/dev/null)
    for file in "${files[@]}"; do
      pid=${file#/proc/}
      pids+=("${pid%/environ}")
    done
    ((${#pids[@]} > 0)) || return 0
    ((round > 1)) || echo "tests/gpu: $1 left ${#pids[@]} process(es) running: ending them by id: ${pids[*]}"
    kill -KILL "${pids[@]}" 2>/dev/null
    sleep 1
  done
  echo "tests/gpu: still running after SIGKILL: ${pids[*]}"
}

# Which GPU this is (the lent kinds differ in name and memory: H100 80 GB, H200 141 GB); nothing in
# the checks depends on it, the summary records it.
gpu_line="$gpus GPU(s): $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
summary=()
# Packs the logs, whatever the outcome (the exit status is kept).
pack() {
  local rc=$?
  if ((${#summary[@]} > 0)) && [[ -n "$summary_file" ]]; then
    { echo "gpu: $gpu_line"; printf '%-24s %7s  %s\n' "check" "time" "result"; printf '%s\n' "${summary[@]}"; } \
      >"$summary_file"
    cp "$summary_file" "$logs/summary.txt"
  fi
  tar -czf "$archive" -C "$(dirname "$logs")" "$(basename "$logs")" && echo "tests/gpu: logs packed into $archive"
  rm -rf "$work"
  exit "$rc"
}
trap pack EXIT
echo "tests/gpu: $gpu_line"
export PYTHONUNBUFFERED=1

# The carried wheel, installed for the interpreter that holds torch, into this run's folder.
mkdir -p "$logs/install"
start=$SECONDS
if ((checkout)); then
  echo "tests/gpu: --checkout: the checks use $repo/python"
  summary+=("$(printf '%-24s %6ss  %s' install 0 "skipped (--checkout)")")
else
  site=$work/site
  # shellcheck disable=SC2016  # the script's variables are its own arguments
  if ! timeout --kill-after="$KILL_GRACE" "$install_cap" bash -c '
        python=$1 wheel=$2 site=$3
        "$python" -m pip install --no-index --no-deps --no-cache-dir --disable-pip-version-check --no-input \
          --target "$site" "$wheel" || exit
        cd / && PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH} "$python" -c "
import sys, torch
import acspeed, acspeed._core, acspeed._probes
nccl = \".\".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else \"unknown (no CUDA device)\"
print(\"python\", sys.version.split()[0], sys.executable)
print(\"torch\", torch.__version__, \"CUDA\", torch.version.cuda, \"NCCL\", nccl)
print(\"acspeed\", acspeed._core.__version__, \"at\", acspeed.__path__[0])"
      ' install "$python" "$wheel" "$site" >"$logs/install/output.txt" 2>&1; then
    echo "tests/gpu: installing $wheel failed (or ran past ${install_cap}s):"
    tail -15 "$logs/install/output.txt"
    summary+=("$(printf '%-24s %6ss  %s' install $((SECONDS - start)) "FAIL")")
    exit 1
  fi
  grep -E '^(python|torch|acspeed) ' "$logs/install/output.txt"
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH} PATH=$site/bin:$PATH
  export ACSPEED_GPU_INSTALLED=1 ACSPEED_GPU_SITE=$site
  echo "tests/gpu: installed $(basename "$wheel") into $site (removed at the end)"
  summary+=("$(printf '%-24s %6ss  %s' install $((SECONDS - start)) pass)")
fi
export ACSPEED_PYTHON=$python
echo "tests/gpu: ${#order[@]} check(s), logs in $logs, ${run_timeout_s}s for the whole run"

failed=0
for name in "${order[@]}"; do
  cap=${cap_of[$name]}
  left=$((run_timeout_s - SECONDS - PACK_RESERVE - KILL_GRACE))
  if ((cap > left)); then
    summary+=("$(printf '%-24s %6ss  %s' "$name" 0 "FAIL (not run: needs ${cap}s, ${left}s of the run left)")")
    failed=1
    continue
  fi
  mkdir -p "$logs/$name"
  echo "=== $name (at most ${cap}s)"
  start=$SECONDS
  # Not a pipeline into tee: bash would wait for a leftover process holding the pipe open.
  exec {to_tee}> >(tee "$logs/$name/output.txt")
  tee_pid=$!
  ACSPEED_GPU_CHECK_ID="$run_id-$name" ACSPEED_GPU_LOG_DIR="$logs/$name" ACSPEED_GPU_CHECK_BUDGET="$cap" \
    timeout --kill-after="$KILL_GRACE" "$cap" bash "$here/check_$name.sh" >&"$to_tee" 2>&1
  rc=$?
  exec {to_tee}>&-
  elapsed=$((SECONDS - start))
  end_leftovers "$name" >"$work/leftovers.txt"
  wait "$tee_pid" 2>/dev/null
  tee -a "$logs/$name/output.txt" <"$work/leftovers.txt"
  case $rc in
    0) result=pass ;;
    77) result=skipped ;;
    124 | 137) result="FAIL (cut off at its ${cap}s cap)"; failed=1 ;;
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
