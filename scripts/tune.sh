#!/usr/bin/env bash
# The main job in one command: set up and build what is missing (scripts/setup.sh), then tune with
# acspeed-tune on the default store. Arguments go to acspeed-tune, e.g.
#   scripts/tune.sh --model resnet50 --precision amp
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$ROOT/scripts/setup.sh" >&2
exec "${ACSPEED_BUILD_DIR:-$ROOT/build}/bin/acspeed-tune" "$@"
