#!/usr/bin/env bash
# The machine's CPU busy share (every core together, from /proc/stat) every INTERVAL seconds:
# one line "<seconds since start> <busy %>" each. `make test` runs it beside the suite and prints
# the minutes' averages at the end: where the CI's cores sit idle, there is time to win by
# running more at once; where they are busy, only by doing less work (docs/development.md,
# "The CI's time budget"). Exits quietly where /proc/stat is missing (not Linux).
#   scripts/cpu_busy.sh [INTERVAL]
set -u
interval="${1:-10}"
[ -r /proc/stat ] || exit 0
sample() { read -r _ u n s i w q sq st _ < /proc/stat; total=$((u + n + s + i + w + q + sq + st)); idle=$((i + w)); }
sample
prev_total=$total prev_idle=$idle start=$(date +%s)
while sleep "$interval"; do
  sample
  dt=$((total - prev_total)) di=$((idle - prev_idle))
  [ "$dt" -gt 0 ] && echo "$(($(date +%s) - start)) $((100 * (dt - di) / dt))"
  prev_total=$total prev_idle=$idle
done
