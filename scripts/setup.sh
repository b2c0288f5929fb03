#!/usr/bin/env bash
# One-command setup in two parts: installs (idempotently) the Debian packages and the Python
# packages acspeed needs, builds the acspeed wheel (pyproject.toml: the same build as `pip install
# .`, kept in the build folder) and installs it with pip into the python3 first on PATH (or
# $ACSPEED_PYTHON), so that `import acspeed` works there, that environment is the one acspeed-tune
# starts its workers with, and `acspeed-tune` and `acspeed-testbed` are on PATH. A second run
# installs no packages: those present are skipped and pip keeps its downloads in its cache
# (~/.cache/pip, outside the checkout).
#
#   scripts/setup.sh            # the tune part (scripts/tune.sh): what tuning needs, the build without the tests
#   scripts/setup.sh --tests    # and the test part (scripts/test.sh): GoogleTest, Chromium, iproute2, sqlite3,
#                               # pytest and pillow, the build with the GoogleTest suites
#   ACSPEED_BUILD_DIR=DIR       # build folder (default: build/ in the checkout); the wheel goes to DIR/dist
#   ACSPEED_PREFIX=DIR          # where the commands are linked (default: /usr/local as root, else ~/.local)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${ACSPEED_BUILD_DIR:-$ROOT/build}
PYTHON=${ACSPEED_PYTHON:-$(command -v python3 || true)}
if [ "$(id -u)" = 0 ]; then PREFIX=${ACSPEED_PREFIX:-/usr/local}; SUDO=; else PREFIX=${ACSPEED_PREFIX:-$HOME/.local}; SUDO=sudo; fi
say() { printf '[setup] %s\n' "$*"; }
tests=OFF
case "${1:-}" in
  --tests) tests=ON ;;
  "") ;;
  *) echo "setup: unknown argument '$1' (accepted: --tests, or nothing)" >&2; exit 2 ;;
esac
# A build folder configured with the tests keeps them (a tune after scripts/test.sh drops nothing).
grep -qx 'ACSPEED_BUILD_TESTS:BOOL=ON' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null && tests=ON
[ -n "$PYTHON" ] || { echo "setup: no python3 on PATH (set ACSPEED_PYTHON)" >&2; exit 1; }
# Record the interpreter itself, not a launcher shim (pyenv) that may resolve differently later.
PYTHON=$("$PYTHON" -c 'import sys; print(sys.executable)')

# 1. Debian packages (compilers, CMake and the CUDA toolkit come with the machine; ccache keeps the
#    compiled objects outside the checkout, for the next clone: scripts/compiler-cache.sh). The test
#    part adds GoogleTest, iproute2 (the emulated cluster), sqlite3 and Chromium (the HTML report's
#    rendering test), the largest download.
APT_PACKAGES=(build-essential cmake ninja-build pkg-config git libboost-program-options-dev libfmt-dev
  libsqlite3-dev nlohmann-json3-dev ccache)
[ "$tests" = OFF ] || APT_PACKAGES+=(libgtest-dev googletest iproute2 sqlite3 chromium)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  say "Debian packages: all present"
fi

# 2. Python packages for that interpreter: torch >= 2.1 with torchvision (PyPI; Debian's 1.13 cannot
#    launch torch.distributed.run on Python 3.11), numpy (the benchmark), and the build's own needs
#    (pyproject.toml's build-system: scikit-build-core, pybind11), which the build below takes from
#    this interpreter rather than from a fresh isolated environment each time; the test part adds
#    pytest, pytest-xdist (scripts/test.sh runs the suite on two workers) and pillow (the report's
#    screenshot test). Each as pip's requirement and the minimum (major, minor) that counts as present.
PY_PACKAGES=("torch>=2.1" torchvision numpy "pybind11>=2.10" "scikit-build-core>=0.10")
[ "$tests" = OFF ] || PY_PACKAGES+=("pytest>=7.0" "pytest-xdist>=3.6" "pillow>=9.0")
if "$PYTHON" - "${PY_PACKAGES[@]}" <<'PY' 2>/dev/null
import importlib.metadata as m, sys
for requirement in sys.argv[1:]:
    name, _, minimum = requirement.partition(">=")
    version = tuple(int(p) for p in m.version(name).split("+")[0].split(".")[:2])
    sys.exit(1) if minimum and version < tuple(int(p) for p in minimum.split(".")) else None
PY
then
  say "Python packages: all present for $PYTHON"
else
  say "installing Python packages for $PYTHON (torch is large the first time; pip caches it)"
  "$PYTHON" -m pip install -q --disable-pip-version-check "${PY_PACKAGES[@]}"
fi

# 3. Build the wheel: CMake configures and builds in $BUILD_DIR (with the test part, also the
#    GoogleTest suites, which ctest runs there), the wheel lands in $BUILD_DIR/dist. Through ccache
#    when installed: a clone of sources built before compiles nothing again (scripts/compiler-cache.sh).
. "$ROOT/scripts/compiler-cache.sh"
say "building in $BUILD_DIR, tests $tests${CMAKE_CXX_COMPILER_LAUNCHER:+ (through $CMAKE_CXX_COMPILER_LAUNCHER)}"
mkdir -p "$BUILD_DIR/dist"
rm -f "$BUILD_DIR"/dist/acspeed-*.whl
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} "$PYTHON" -m pip wheel -q --disable-pip-version-check \
  --no-build-isolation --no-deps -w "$BUILD_DIR/dist" -C build-dir="$BUILD_DIR" \
  -C cmake.define.ACSPEED_BUILD_TESTS="$tests" "$ROOT"
wheel=$(ls "$BUILD_DIR"/dist/acspeed-*.whl)

# 4. Install it into $PYTHON's environment (the same version again replaces the last build), and
#    link the entry points pip made into $PREFIX/bin.
"$PYTHON" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall "$wheel"
SCRIPTS=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
SITE=$("$PYTHON" -c 'import site, sysconfig, os, sys
p = sysconfig.get_path("purelib")
print(p if os.access(p, os.W_OK) else site.getusersitepackages())')
rm -f "$SITE/acspeed.pth"  # earlier setups pointed a .pth at the checkout instead of installing
if [ "$SCRIPTS" != "$PREFIX/bin" ]; then
  mkdir -p "$PREFIX/bin"
  for program in acspeed-tune acspeed-testbed; do ln -sf "$SCRIPTS/$program" "$PREFIX/bin/$program"; done
fi
say "installed $(basename "$wheel") into $PYTHON; $PREFIX/bin/acspeed-tune -> $SCRIPTS/acspeed-tune"
case ":$PATH:" in *":$PREFIX/bin:"*) ;; *) say "note: add $PREFIX/bin to PATH" ;; esac
