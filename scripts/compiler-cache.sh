# Sourced by scripts/setup.sh and scripts/fuzz.sh (with ROOT set to the checkout): compiles through
# ccache when it is installed (scripts/setup.sh installs it), so that a build of sources compiled
# before reuses their objects: a fresh clone in another folder, the fuzz build, and the non-root
# `pip install .` of tests/packaging/test_wheel.py (which reads this cache as `nobody`). A cache
# outside the checkout (ccache's own, ~/.cache/ccache) outlives every clone.
#   CCACHE_BASEDIR: paths below the checkout enter the cache key relative to the build folder, so two
#                   clones in different folders share their entries;
#   CCACHE_NOHASHDIR: the build folder's own path is not part of the key either (the build uses -g:
#                   the debug information of a hit names the folder that compiled it first).
# A launcher already chosen (CMAKE_CXX_COMPILER_LAUNCHER set, even empty) is left alone.
if command -v ccache >/dev/null && [ -z "${CMAKE_CXX_COMPILER_LAUNCHER+set}" ]; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
fi
