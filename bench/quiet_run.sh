#!/usr/bin/env bash
# Runs a benchmark as if the machine were quiet, on a machine shared with other work: the command
# runs at nice -20, and while it runs every user-space process outside its process tree on the
# machine is moved to SCHED_IDLE (it gets a core only when the benchmark leaves one idle), re-applied
# every second so that processes started later are caught too (their children inherit the class);
# every idle-class process is put back to SCHED_OTHER when the benchmark ends.
# What this cannot remove: cache and memory-bandwidth sharing with the idle-class work, and the
# kernel's own threads. Say "quiet_run.sh" next to any figure measured this way.
#
#   bench/quiet_run.sh python3 bench/runtime/hooks_vs_stock.py --links 2x1@2gbit
#
# Needs root (to change other users' processes and to raise priority).
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: bench/quiet_run.sh COMMAND [ARG...]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "quiet_run.sh: needs root (changes other processes' scheduling class)" >&2; exit 2; }

nice -n -20 "$@" &
bench=$!
self=$$

others() {  # user-space processes outside the benchmark's process tree (its nodes may start sessions
            # of their own, so the tree is followed by parent pid) and other than this script
  ps -e -o pid=,ppid= | awk -v bench="$bench" -v self="$self" '
    { parent[$1] = $2; pids[++n] = $1 }
    END {
      mine[bench] = 1
      do { grown = 0; for (i = 1; i <= n; i++) { p = pids[i]; if (!(p in mine) && (parent[p] in mine)) { mine[p] = 1; grown = 1 } } } while (grown)
      for (i = 1; i <= n; i++) { p = pids[i]
        if (!(p in mine) && p != self && parent[p] != self && p != 1 && p != 2 && parent[p] != 2) print p }
    }'
}

restore() {  # every idle-class process, also those forked from one after the last sweep
  for pid in $(ps -e -o pid=,cls= | awk '$2 == "IDL" {print $1}'); do chrt -a -o -p 0 "$pid" 2>/dev/null || true; done
}
trap 'kill -TERM "$bench" 2>/dev/null; wait "$bench"; restore; exit 130' INT TERM
trap restore EXIT

declare -A seen=()
while kill -0 "$bench" 2>/dev/null; do
  for pid in $(others); do
    [ -n "${seen[$pid]:-}" ] || { chrt -a -i -p 0 "$pid" 2>/dev/null || true; seen[$pid]=1; }
  done
  sleep 1
done
wait "$bench"
