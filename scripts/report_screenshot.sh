#!/usr/bin/env bash
# The picture of the HTML report the README shows (docs/report.png): renders a session of a store
# as HTML (`acspeed-tune report --format html`) and photographs the top of the page in headless
# Chromium, 1280 px wide (the decision in words, then the first plots).
#
#   scripts/report_screenshot.sh DB [SESSION] [OUT]   # default: the latest session, docs/report.png
#
# acspeed-tune is the one on PATH, else build/bin/acspeed-tune of this checkout.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: scripts/report_screenshot.sh DB [SESSION] [OUT]" >&2; exit 2; }
db=$1
session=${2:-}
out=${3:-$ROOT/docs/report.png}
tune=$(command -v acspeed-tune || echo "$ROOT/build/bin/acspeed-tune")
chromium=$(command -v chromium || command -v chromium-browser || command -v google-chrome) ||
  { echo "report_screenshot: no headless Chromium installed (Debian: apt-get install chromium)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$tune" --db "$db" report ${session:+--session "$session"} --format html -o "$work/report.html" >/dev/null
# --no-sandbox: Chromium refuses to run as root with its sandbox.
"$chromium" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars --user-data-dir="$work/profile" \
  --window-size=1280,1600 --screenshot="$out" "file://$work/report.html" 2>/dev/null
[ -s "$out" ] || { echo "report_screenshot: Chromium wrote no $out" >&2; exit 1; }
echo "report_screenshot: wrote $out"
