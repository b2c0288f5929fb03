#!/usr/bin/env bash
# The main job in one command: set up and build what tuning needs and is missing (scripts/setup.sh's
# tune part: no test packages, no test targets), then tune with acspeed-tune on the default store.
# Arguments go to acspeed-tune, e.g.
#   scripts/tune.sh --model resnet50 --precision amp
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$ROOT/scripts/setup.sh" >&2
# The acspeed-tune setup.sh installed into that interpreter's environment.
PYTHON=$("${ACSPEED_PYTHON:-$(command -v python3)}" -c 'import sys; print(sys.executable)')
exec "$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/acspeed-tune" "$@"
