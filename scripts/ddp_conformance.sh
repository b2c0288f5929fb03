#!/usr/bin/env bash
# torch's own DDP tests as acspeed's conformance suite (docs/ddp-conformance.md): the DDP tests of
# torch.testing._internal.distributed.distributed_test on gloo at world size 2, first without acspeed
# (baseline: every DDP test of the class; most need GPUs and skip), then, for each config family, the
# tests that ran in the baseline, with `import acspeed` in every rank and ACSPEED_CONFIG forcing the
# family's config; the `online` family forces none: no decision, so online tuning runs (with short
# windows, scripts/ddp_conformance_runner.py). Out of CI: about 30 s per test that runs on 2 cores.
#
#   scripts/ddp_conformance.sh [OUT_DIR] [FAMILY ...]     (default: build/conformance, every family)
#
# ACSPEED_CONFORMANCE_ONLY="test_a test_b" limits the baseline to those tests (the families then run
# the ones of them that ran).
#
# torch's test helpers import `expecttest`: it is installed with pip --target into OUT_DIR/site, never
# into the interpreter's environment. Writes OUT_DIR/<family>.json (test -> outcome) and
# OUT_DIR/<family>.log, and prints the counts per family and each test whose outcome differs from
# the baseline's.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${ACSPEED_PYTHON:-$(command -v python3)}
OUT=$(mkdir -p "${1:-$ROOT/build/conformance}" && cd "${1:-$ROOT/build/conformance}" && pwd)
shift || true
FAMILIES=("$@")
[ ${#FAMILIES[@]} -gt 0 ] || FAMILIES=(baseline bucket hooked fp16 powersgd online)

declare -A CONFIGS=(
  [bucket]='{"version": 2, "bucket_cap_mb": 5, "first_bucket_mb": 1, "gradient_as_bucket_view": true}'
  [hooked]='{"version": 2, "algorithm": "reduce_scatter", "streams": 2}'
  [fp16]='{"version": 2, "compression": "fp16"}'
  [powersgd]='{"version": 2, "compression": "powersgd", "powersgd_rank": 4, "powersgd_start_step": 0}'
  [online]=''  # no decision: tuned online
)

if [ ! -d "$OUT/site/expecttest" ]; then
  "$PYTHON" -m pip install -q --disable-pip-version-check --target "$OUT/site" expecttest
fi
export PYTHONPATH="$ROOT/python:$OUT/site${PYTHONPATH:+:$PYTHONPATH}"
export BACKEND=gloo WORLD_SIZE=2 GLOO_SOCKET_IFNAME=${GLOO_SOCKET_IFNAME:-lo} ACSPEED_DB="$OUT/none.db"

for family in "${FAMILIES[@]}"; do
  if [ "$family" != baseline ] && [ -z "${CONFIGS[$family]+x}" ]; then
    echo "unknown family '$family': one of baseline ${!CONFIGS[*]}" >&2
    exit 2
  fi
  tests=${ACSPEED_CONFORMANCE_ONLY:-}
  if [ "$family" != baseline ]; then
    if [ ! -f "$OUT/baseline.json" ]; then
      echo "run the baseline family first ($OUT/baseline.json is missing)" >&2
      exit 2
    fi
    tests=$("$PYTHON" -c 'import json, sys
print(" ".join(n for n, r in sorted(json.load(open(sys.argv[1])).items()) if r["outcome"] != "skip"))' \
      "$OUT/baseline.json")
    if [ -n "${CONFIGS[$family]}" ]; then printf '%s\n' "${CONFIGS[$family]}" > "$OUT/$family.config.json"; fi
  fi
  temp=$(mktemp -d)
  echo "== $family $(date -u +%H:%M:%S)" >&2
  (
    cd "$temp"
    if [ -n "${CONFIGS[$family]:-}" ]; then export ACSPEED_CONFIG="$OUT/$family.config.json"; fi
    TEMP_DIR="$temp" ACSPEED_CONFORMANCE_FAMILY="$family" ACSPEED_CONFORMANCE_TESTS="$tests" \
      ACSPEED_CONFORMANCE_RESULT="$OUT/$family.json" \
      "$PYTHON" "$ROOT/scripts/ddp_conformance_runner.py" > "$OUT/$family.log" 2>&1
  ) || echo "the $family run exited non-zero: see $OUT/$family.log" >&2
  rm -rf "$temp"
done

"$PYTHON" - "$OUT" "${FAMILIES[@]}" <<'EOF'
import json, os, sys
out, families = sys.argv[1], sys.argv[2:]
results = {f: json.load(open(os.path.join(out, f + ".json"))) for f in families
           if os.path.exists(os.path.join(out, f + ".json"))}
base = results.get("baseline") or (json.load(open(os.path.join(out, "baseline.json")))
                                   if os.path.exists(os.path.join(out, "baseline.json")) else {})
print(f"{'family':<10} {'run':>4} {'pass':>5} {'fail':>5} {'skip':>5}")
for family, outcomes in results.items():
    counts = {k: sum(r["outcome"] == k for r in outcomes.values()) for k in ("pass", "fail", "error", "skip")}
    print(f"{family:<10} {len(outcomes) - counts['skip']:>4} {counts['pass']:>5} "
          f"{counts['fail'] + counts['error']:>5} {counts['skip']:>5}")
for family, outcomes in results.items():
    for name, result in sorted(outcomes.items()):
        before = base.get(name, {}).get("outcome")
        if result["outcome"] != before:
            last = [line for line in result["detail"].splitlines() if "Error" in line][-1:] or [""]
            print(f"{family}: {name}: {before} -> {result['outcome']}: {last[0][:200]}")
EOF
