#!/usr/bin/env bash
# Runs every libFuzzer target (tests/fuzz) for a fixed budget: configures a clang build with
# -DACSPEED_FUZZ=ON (fuzzer coverage + AddressSanitizer) in its own folder, builds only the fuzz
# targets and what they link, and runs ctest's fuzz_*_libfuzzer tests (-runs and -seed fixed, so a
# run is repeatable). A crash or a broken property fails the test and leaves the input in
# $ACSPEED_FUZZ_BUILD_DIR/tests/fuzz/found/<target>-crash-*; copy it into tests/fuzz/corpus/<target>/ with the fix.
#
#   scripts/fuzz.sh                  # ACSPEED_FUZZ_RUNS=20000 per target, seed 1
#   ACSPEED_FUZZ_RUNS=N ACSPEED_FUZZ_SEED=S scripts/fuzz.sh
#   ACSPEED_FUZZ_BUILD_DIR=DIR       # build folder (default: build-fuzz/ in the checkout)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${ACSPEED_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}
PYTHON=${ACSPEED_PYTHON:-$(command -v python3)}
command -v clang++ >/dev/null || { echo "fuzz: clang++ is not installed (Debian: clang)" >&2; exit 1; }
mkdir -p "$BUILD_DIR"
. "$ROOT/scripts/compiler-cache.sh"  # ccache when installed: a second clone compiles nothing again
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DACSPEED_FUZZ=ON -DACSPEED_WITH_CUDA=OFF \
  -DPython3_EXECUTABLE="$PYTHON" -DACSPEED_DEFAULT_PYTHON="$PYTHON" \
  -DACSPEED_FUZZ_RUNS="${ACSPEED_FUZZ_RUNS:-20000}" -DACSPEED_FUZZ_SEED="${ACSPEED_FUZZ_SEED:-1}" \
  >"$BUILD_DIR/configure.log" 2>&1 || { cat "$BUILD_DIR/configure.log"; exit 1; }
cmake --build "$BUILD_DIR" -j "$(nproc)" --target acspeed_fuzz_targets  # 20 parser sources + 6 targets
ctest --test-dir "$BUILD_DIR" --output-on-failure -R '^fuzz_.*_libfuzzer$'
