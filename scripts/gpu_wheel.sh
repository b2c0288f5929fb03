#!/usr/bin/env bash
# Builds the acspeed wheel for the lent GPU machine's Python (3.12) on this CPU machine, into dist/ of
# this checkout (the folder the device call carries), and prints that call.
#
#   scripts/gpu_wheel.sh [PYTHON]      # default: $ACSPEED_WHEEL_PYTHON, else python3.12 on PATH, else
#                                      # pyenv's 3.12 (/root/.pyenv/versions/3.12.*/bin/python3)
#
# The GPU machine cannot build it (no Boost, fmt, SQLite or nlohmann development files, no network).
# The build has a folder of its own, build-cpXY/ (CMake refuses to reuse build/, the CPU suite's
# cp311 build); with ccache (used when installed) the C++ objects that do not depend on Python come
# from the cp311 build's cache. pip builds in an isolated environment (scikit-build-core and pybind11
# for that Python: from pip's cache, else PyPI). Earlier wheels for the same Python are removed from
# dist/ first (tests/gpu/run.sh refuses several). Then `tests/gpu/run.sh --dry-run` checks the result
# as the device machine will choose it, and prints the budgets and the device call.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${1:-${ACSPEED_WHEEL_PYTHON:-}}
if [[ -z "$python" ]]; then  # the first 3.12 that runs (pyenv's shim for python3.12 may not)
  for candidate in "$(command -v python3.12 || true)" /root/.pyenv/versions/3.12.*/bin/python3; do
    if [[ -x "$candidate" ]] && "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
      python=$candidate
      break
    fi
  done
fi
[[ -n "$python" ]] || { echo "scripts/gpu_wheel.sh: no Python 3.12 found; name one: scripts/gpu_wheel.sh PYTHON" >&2; exit 2; }
tag=$("$python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])') ||
  { echo "scripts/gpu_wheel.sh: $python does not run" >&2; exit 2; }
[[ "$tag" == cp312 ]] || echo "scripts/gpu_wheel.sh: note: $python is $tag; the lent GPU machine runs cp312"

build=$repo/build-$tag
dist=$repo/dist
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
  # Relative paths and no build folder in the hash (ccache hashes it with -g): build/ and build-cpXY/
  # share objects. The wheel's binaries are stripped, so no debug path of another folder ships.
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$repo")} CCACHE_NOHASHDIR=1
fi
mkdir -p "$dist"
rm -f "$dist"/acspeed-*-"$tag"-"$tag"-*.whl
start=$SECONDS
echo "scripts/gpu_wheel.sh: building the $tag wheel with $python in $build (tests off) into $dist"
# The modules for that Python stay in the build folder: the checkout's python/acspeed is the CPU suite's.
"$python" -m pip wheel -q --disable-pip-version-check --no-deps -w "$dist" -C build-dir="$build" \
  -C cmake.define.ACSPEED_BUILD_TESTS=OFF -C cmake.define.ACSPEED_PYTHON_PACKAGE_DIR="$build/package" "$repo"
wheels=("$dist"/acspeed-*-"$tag"-"$tag"-*.whl)
[[ -f "${wheels[0]}" ]] || { echo "scripts/gpu_wheel.sh: pip made no $tag wheel in $dist" >&2; exit 1; }
echo "scripts/gpu_wheel.sh: built ${wheels[0]#"$repo"/} ($(du -h "${wheels[0]}" | cut -f1)) in $((SECONDS - start)) s"
ACSPEED_PYTHON=$python "$repo/tests/gpu/run.sh" --dry-run
