#!/usr/bin/env bash
# Runs every test: sets up and builds what is missing (scripts/setup.sh), then the GoogleTest suites
# (ctest) and the pytest suites, then the libFuzzer targets when clang++ is installed
# (scripts/fuzz.sh). Tests that need root (the emulated cluster) run when root, as in CI.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${ACSPEED_BUILD_DIR:-$ROOT/build}
PYTHON=${ACSPEED_PYTHON:-$(command -v python3)}
"$ROOT/scripts/setup.sh"
status=0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j 2 || status=1
(cd "$ROOT" && ACSPEED_BUILD_DIR="$BUILD_DIR" "$PYTHON" -m pytest -q -p no:cacheprovider --durations=25 "$@") || status=1
# libFuzzer over the parsers (docs/reliability.md): a clang build of 14 sources in build-fuzz/ and
# 20000 runs per target, seed 1 (about a minute of CPU for the runs, two for the first build).
if command -v clang++ >/dev/null; then "$ROOT/scripts/fuzz.sh" || status=1; fi
exit $status
