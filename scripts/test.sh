#!/usr/bin/env bash
# Runs every test: sets up and builds what is missing (scripts/setup.sh), then the GoogleTest suites
# (ctest) and the pytest suites. Tests that need root (the emulated cluster) run when root, as in CI.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${ACSPEED_BUILD_DIR:-$ROOT/build}
PYTHON=${ACSPEED_PYTHON:-$(command -v python3)}
"$ROOT/scripts/setup.sh"
status=0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j 2 || status=1
(cd "$ROOT" && ACSPEED_BUILD_DIR="$BUILD_DIR" "$PYTHON" -m pytest -q -p no:cacheprovider "$@") || status=1
exit $status
