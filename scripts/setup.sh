#!/usr/bin/env bash
# One-command setup: installs (idempotently) the Debian packages and the Python packages acspeed
# needs, builds it, and installs it so that `acspeed-tune` and `acspeed-testbed` are on PATH and
# `import acspeed` works for the python3 first on PATH (or $ACSPEED_PYTHON). A second run installs
# nothing: packages already present are skipped and pip keeps its downloads in its cache
# (~/.cache/pip, outside the checkout).
#
#   scripts/setup.sh            # install + build + install
#   ACSPEED_BUILD_DIR=DIR       # build folder (default: build/ in the checkout)
#   ACSPEED_PREFIX=DIR          # where the binaries go (default: /usr/local as root, else ~/.local)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${ACSPEED_BUILD_DIR:-$ROOT/build}
PYTHON=${ACSPEED_PYTHON:-$(command -v python3 || true)}
if [ "$(id -u)" = 0 ]; then PREFIX=${ACSPEED_PREFIX:-/usr/local}; SUDO=; else PREFIX=${ACSPEED_PREFIX:-$HOME/.local}; SUDO=sudo; fi
say() { printf '[setup] %s\n' "$*"; }
[ -n "$PYTHON" ] || { echo "setup: no python3 on PATH (set ACSPEED_PYTHON)" >&2; exit 1; }
# Record the interpreter itself, not a launcher shim (pyenv) that may resolve differently later.
PYTHON=$("$PYTHON" -c 'import sys; print(sys.executable)')

# 1. Debian packages (compilers, CMake and the CUDA toolkit come with the machine).
APT_PACKAGES=(build-essential cmake ninja-build pkg-config git libboost-program-options-dev libfmt-dev
  libsqlite3-dev sqlite3 nlohmann-json3-dev libgtest-dev googletest iproute2 chromium)
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
#    launch torch.distributed.run on Python 3.11), pytest, numpy, pybind11.
if "$PYTHON" - <<'PY' 2>/dev/null
import importlib.metadata as m, sys
need = {"torch": (2, 1), "torchvision": (0, 0), "pytest": (7, 0), "numpy": (1, 0), "pybind11": (2, 10), "pillow": (9, 0)}
for name, minimum in need.items():
    version = tuple(int(p) for p in m.version(name).split("+")[0].split(".")[:2])
    sys.exit(1) if version < minimum else None
PY
then
  say "Python packages: all present for $PYTHON"
else
  say "installing Python packages for $PYTHON (torch is large the first time; pip caches it)"
  "$PYTHON" -m pip install -q --disable-pip-version-check 'torch>=2.1' torchvision pytest numpy 'pybind11>=2.10' pillow
fi

# 3. Build.
say "building in $BUILD_DIR"
mkdir -p "$BUILD_DIR"
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPython3_EXECUTABLE="$PYTHON" -DACSPEED_DEFAULT_PYTHON="$PYTHON" \
  -DCMAKE_INSTALL_PREFIX="$PREFIX" >"$BUILD_DIR/configure.log" 2>&1 || { cat "$BUILD_DIR/configure.log"; exit 1; }
cmake --build "$BUILD_DIR" -j "$(nproc)"

# 4. Install: binaries under $PREFIX/bin, and a .pth in the interpreter's site-packages pointing at
#    this checkout's python/ folder (an editable install: the built modules live there).
cmake --install "$BUILD_DIR" >/dev/null
SITE=$("$PYTHON" -c 'import site, sysconfig, os, sys
p = sysconfig.get_path("purelib")
print(p if os.access(p, os.W_OK) else site.getusersitepackages())')
mkdir -p "$SITE"
echo "$ROOT/python" >"$SITE/acspeed.pth"
say "installed: $PREFIX/bin/acspeed-tune; import acspeed -> $ROOT/python (via $SITE/acspeed.pth)"
case ":$PATH:" in *":$PREFIX/bin:"*) ;; *) say "note: add $PREFIX/bin to PATH" ;; esac
