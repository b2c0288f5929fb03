#!/usr/bin/env bash
# Runs every test: sets up and builds what is missing (scripts/setup.sh --tests), then the GoogleTest suites
# (ctest) and the pytest suites, and the libFuzzer targets when clang++ is installed
# (scripts/fuzz.sh) beside them: the fuzz stage shares no file, port or process with the others, so it
# runs while they do (its output follows theirs). Tests that need root (the emulated cluster) run
# when root, as in CI. docs/testing.md: how the suite is organised and where its time goes.
#
#   scripts/test.sh                  # everything (CI)
#   scripts/test.sh --quick          # while working: ctest and the pytest tests not marked slow, no fuzz stage
#   scripts/test.sh [--quick] ARGS   # ARGS go to pytest (a file, -k EXPR, -m MARKERS)
#   ACSPEED_TEST_WORKERS=1 scripts/test.sh ...   # pytest on one worker (default 2, a test file each)
#
# Each run writes the per-test times to $BUILD_DIR/test-times/ (JUnit XML) and prints them summed
# per file (scripts/test_times.py), with each stage's wall time.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${ACSPEED_BUILD_DIR:-$ROOT/build}
PYTHON=${ACSPEED_PYTHON:-$(command -v python3)}
# pytest's workers (pytest-xdist), each running whole test files: most tests wait on one process at a
# time (an interpreter importing torch, pip, a timeout, a rate-capped link), so two keep two cores busy.
WORKERS=${ACSPEED_TEST_WORKERS:-2}
quick=()
if [ "${1:-}" = --quick ]; then quick=(-m "not slow"); shift; fi
stage() { printf '[test] %s\n' "$*"; }

start=$SECONDS
"$ROOT/scripts/setup.sh" --tests
stage "setup and build: $((SECONDS - start)) s"
status=0
fuzz_pid=
if [ ${#quick[@]} = 0 ] && command -v clang++ >/dev/null; then
  # libFuzzer over the parsers (docs/reliability.md): a clang build of 20 sources in build-fuzz/ and
  # 20000 runs per target, seed 1 (about a minute of CPU for the runs, two for a first build).
  fuzz_log=$(mktemp)
  (start=$SECONDS code=0; "$ROOT/scripts/fuzz.sh" || code=$?; stage "fuzz stage: $((SECONDS - start)) s"; exit $code) \
    >"$fuzz_log" 2>&1 &
  fuzz_pid=$!
fi
times=$BUILD_DIR/test-times
mkdir -p "$times"
start=$SECONDS
ctest --test-dir "$BUILD_DIR" --output-on-failure -j 2 --output-junit "$times/ctest.xml" || status=1
stage "ctest: $((SECONDS - start)) s"
start=$SECONDS
(cd "$ROOT" && ACSPEED_BUILD_DIR="$BUILD_DIR" "$PYTHON" -m pytest -q -p no:cacheprovider --durations=25 \
  -n "$WORKERS" --dist loadfile --no-loadscope-reorder --junitxml="$times/pytest.xml" "${quick[@]}" "$@") || status=1
stage "pytest: $((SECONDS - start)) s"
"$PYTHON" "$ROOT/scripts/test_times.py" --top 25 --ctest "$times/ctest.xml" --pytest "$times/pytest.xml" || status=1
if [ -n "$fuzz_pid" ]; then
  wait "$fuzz_pid" || status=1
  cat "$fuzz_log"
  rm -f "$fuzz_log"
fi
exit $status
