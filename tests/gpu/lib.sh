# Shared by the tests/gpu/check_*.sh scripts: `source` it after setting $python and $repo.
# shellcheck shell=bash disable=SC2154,SC2034  # $python, $repo and worker() come from, and two_nodes_skipped and groups go to, the sourcing script

fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "ok: $*"; }
free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Exits 77 (skipped) unless torch under $python sees a CUDA device and has NCCL.
require_cuda_torch() {
  local cuda
  cuda=$("$python" -c 'import torch, torch.distributed as d; print(int(torch.cuda.is_available() and d.is_nccl_available()))' 2>&1) ||
    fail "$python cannot import torch: $cuda"
  if [[ "$cuda" != 1 ]]; then
    echo "skipped: torch under $python sees no CUDA device or has no NCCL"
    exit 77
  fi
}

# The NCCL process groups torch under $python has, one line each: "<TORCH_DIST_USE_NCCL2 value> <the
# implementation it builds for backend="nccl">" (docs/nccl2.md). torch 2.14/2.15 register nccl2 beside
# the classic group (entry points of torch.distributed.backends): "1 nccl2" and "0 nccl" (torch names
# the classic group's implementation "nccl"). Older torch has the classic group only: "- nccl", and it
# says "nccl2: not in this torch" on stderr.
nccl_process_groups() {
  local names
  names=$("$python" -c 'from importlib.metadata import entry_points
print(" ".join(e.name for e in entry_points(group="torch.distributed.backends")))' 2>&1) ||
    fail "$python cannot list torch's distributed backends: $names"
  if [[ " $names " == *" nccl2 "* ]]; then
    printf '1 nccl2\n0 nccl\n'
  else
    echo "nccl2: not in this torch" >&2
    echo "- nccl"
  fi
}

# Fills the array $groups with nccl_process_groups' lines and says which groups the check will run
# on (before anything needs a GPU, so that a run without one still shows it). Exits on failure.
read_nccl_process_groups() {
  local entry impls=()
  mapfile -t groups < <(nccl_process_groups)
  ((${#groups[@]} > 0)) || fail "no NCCL process group found for $python"
  for entry in "${groups[@]}"; do impls+=("${entry#* }"); done
  echo "NCCL process groups to run: ${impls[*]}"
}

# The tuner ABI version the NCCL of torch under $python asks for first: 6 (with getChunkSize) from
# NCCL 2.30 on, else 5 (NCCL 2.28-2.29; NCCL v2.30.7-1 src/plugin/tuner.cc tries v6, then v5).
nccl_tuner_abi() {
  "$python" -c 'import torch; print(6 if tuple(torch.cuda.nccl.version()[:2]) >= (2, 30) else 5)' || {
    echo "FAIL: cannot read the NCCL version of torch under $python" >&2
    return 1
  }
}

# Exits 77 (skipped) unless nvidia-smi lists a GPU.
require_gpu() {
  if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "skipped: no GPU here (nvidia-smi missing or lists none)"
    exit 77
  fi
}

# Whether run.sh installed the carried wheel (then its folder, $ACSPEED_GPU_SITE, leads PYTHONPATH
# and the package installed there is the one under test).
wheel_installed() { [[ "${ACSPEED_GPU_INSTALLED:-0}" == 1 ]]; }

# PYTHONPATH for a worker: the checkout's python/ in front, unless the wheel is installed.
worker_pythonpath() {
  if wheel_installed; then echo "${PYTHONPATH:-}"; else echo "$repo/python${PYTHONPATH:+:$PYTHONPATH}"; fi
}

# Says where the acspeed the workers import lies (found, not imported: no torch needed), and fails
# when the wheel is installed but another acspeed would be imported.
report_acspeed() {
  local found
  found=$(cd / && PYTHONPATH="$(worker_pythonpath)" "$python" -c \
    'import importlib.util as u; s = u.find_spec("acspeed"); print(s.submodule_search_locations[0] if s else "none")') ||
    fail "$python does not run"
  echo "acspeed imported from $found"
  if wheel_installed && [[ "$found" != "$ACSPEED_GPU_SITE/acspeed" ]]; then
    fail "the workers would import acspeed from $found, not from the installed wheel ($ACSPEED_GPU_SITE)"
  fi
}

# Seconds left of this check's cap (run.sh gives it as ACSPEED_GPU_CHECK_BUDGET; SECONDS counts from
# the check's start).
budget_left() { echo $((${ACSPEED_GPU_CHECK_BUDGET:-3600} - SECONDS)); }

# A worker's time limit: $1 (its own default, seconds), cut so that it ends, with the 5 s of its
# `timeout --kill-after=5`, at least 5 s before the check's cap (its diagnosis comes before run.sh's kill). Says why on stderr and returns 1 when
# less than $2 seconds would be left for it ($3 names the stage):
#   limit=$(worker_limit 30 10 "stage 1") || exit 1
worker_limit() {
  local want=$1 least=$2 left
  left=$(($(budget_left) - 10))
  if ((left < least)); then
    echo "FAIL: $3 needs at least ${least}s; ${left}s of the check's ${ACSPEED_GPU_CHECK_BUDGET:-}s cap are left" >&2
    return 1
  fi
  echo $((want < left ? want : left))
}

# Builds acspeed._probes on its own (probes/ needs neither Boost, fmt, SQLite nor GoogleTest) for
# $python into ${ACSPEED_GPU_BUILD_DIR:-build-gpu}/probes; the module lands in python/acspeed.
# Nothing to build when the wheel is installed: it has the module. $1: the build log.
build_probes() {
  local log=$1 build=${ACSPEED_GPU_BUILD_DIR:-$repo/build-gpu}/probes
  if wheel_installed; then
    pass "acspeed._probes from the installed wheel"
    return 0
  fi
  echo "--- build: probes/ stand-alone into $build"
  { cmake -S "$repo/probes" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DPython3_EXECUTABLE="$(command -v "$python")" && ninja -C "$build" _probes; } >"$log" 2>&1 ||
    fail "building the probes failed: $(tail -15 "$log")"
  pass "built $(find "$repo/python/acspeed" -maxdepth 1 -name '_probes.*.so' -printf '%f\n' | head -1)"
}

# Runs the script's `worker RANK WORLD STAGE PORT [VAR=value...]` as ranks 0 and 1 of two emulated
# nodes sharing the one GPU (NCCL_HOSTID differs, NCCL's socket transport over loopback: the same
# settings `import acspeed` gives each rank under ACSPEED_SHARE_GPUS=1, python/acspeed/share_gpus.py). Returns
# the last failing worker's status; returns 0 after saying so when the GPU's compute mode is
# exclusive and the stage cannot run (then $two_nodes_skipped is 1). $1: the stage; further arguments
# are VAR=value settings for both workers.
two_nodes_skipped=0
run_two_emulated_nodes() {
  local stage=$1 mode port rank pid rc=0 pids=()
  mode=$(nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>/dev/null | head -1)
  if [[ "$mode" == Exclusive* ]]; then
    echo "$stage skipped: GPU compute mode is $mode (two processes cannot share it)"
    two_nodes_skipped=1
    return 0
  fi
  port=$(free_port)
  for rank in 0 1; do
    worker "$rank" 2 "$stage" "$port" NCCL_HOSTID="acspeed-emulated-node-$rank" NCCL_SOCKET_IFNAME=lo \
      NCCL_IB_DISABLE=1 NCCL_NVLS_ENABLE=0 "${@:2}" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
  return "$rc"
}
