#!/usr/bin/env bash
# The cost of the metrics endpoints: push+pull at one size (default 4 KiB), runs of
# scripts/bench-pushpull.sh without metrics and with --metrics (every daemon serving
# /metrics, each scraped once a second) alternating, ROUNDS of each, which goes first
# alternating too (so that a drift of the machine weighs on both). Prints each run's
# lines, then per mode the medians of step_us off and on and the cost in percent:
#   metrics size=4096 mode=serial off_us=... on_us=... cost_pct=...
# Usage: scripts/bench-metrics.sh [--rounds N (default 5)] [--size BYTES] [--runs N (default 7)]
set -u
here=$(cd "$(dirname "$0")" && pwd)
rounds=5 size=4096 runs=7
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--size BYTES] [--runs N]" >&2; exit 2 ;;
  esac
done
command -v curl > /dev/null || { echo "bench-metrics: curl is needed (scripts/install-deps.sh)" >&2; exit 2; }
out=$(mktemp /tmp/pskv-bench-metrics-XXXXXX)
trap 'rm -f "$out"' EXIT
for ((i = 1; i <= rounds; i++)); do
  order=("" --metrics)
  ((i % 2 == 0)) && order=(--metrics "")
  for m in "${order[@]}"; do
    "$here/bench-pushpull.sh" --sizes "$size" --runs "$runs" $m | tee -a "$out" || exit 1
  done
done
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for mode in serial pipelined; do
  off=$(grep "mode=$mode " "$out" | grep -v metrics=scraped | sed 's/.*step_us=\([0-9.]*\).*/\1/' | median)
  on=$(grep "mode=$mode " "$out" | grep metrics=scraped | sed 's/.*step_us=\([0-9.]*\).*/\1/' | median)
  awk -v s="$size" -v m="$mode" -v a="$off" -v b="$on" \
    'BEGIN { printf "metrics size=%d mode=%s off_us=%.1f on_us=%.1f cost_pct=%.1f\n", s, m, a, b, 100 * (b - a) / a }'
done
