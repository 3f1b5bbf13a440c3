#!/usr/bin/env bash
# The cost of CURVE (docs/benchmarks.md): push+pull of one dense run, 1 server x 1 worker,
# without keys and with keys, back to back per size, each run beside its own baseline
# (scripts/bench-pushpull.sh: the raw ZeroMQ echo without keys, the CURVE echo with
# keys, measured just before each run). One line per size and mode:
#   curve size=BYTES mode=M plain_us=.. keys_us=.. vs_plain=.. echo_plain_us=.. echo_curve_us=.. vs_floor=..
#   vs_plain  = plain_us / keys_us: the throughput kept with keys (1.0 = free)
#   vs_floor  = the keyed runs' median of (CURVE echo / pskv step): 1.0 = as fast as a
#               bare CURVE echo of the same size in the same sitting
# Usage: scripts/bench-curve.sh [--sizes "4096 1048576 16777216"] [--runs N (default 7)]
set -u
here=$(cd "$(dirname "$0")" && pwd)
sizes="4096 1048576 16777216"
runs=7
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) sizes=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) echo "usage: $0 [--sizes \"BYTES...\"] [--runs N]" >&2; exit 2 ;;
  esac
done
out=$(mktemp -d /tmp/pskv-bench-curve-XXXXXX)
trap 'rm -rf "$out"' EXIT
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<< "$2"; }
status=0
for size in $sizes; do
  "$here/bench-pushpull.sh" --sizes "$size" --runs "$runs" > "$out/plain" || status=1
  "$here/bench-pushpull.sh" --sizes "$size" --runs "$runs" --keys > "$out/keys" || status=1
  for mode in serial pipelined; do
    p=$(grep "^size=$size mode=$mode " "$out/plain") k=$(grep "^size=$size mode=$mode " "$out/keys")
    [ -n "$p" ] && [ -n "$k" ] || { echo "bench-curve: no $mode figures for size $size" >&2; status=1; continue; }
    awk -v s="$size" -v m="$mode" -v ps="$(field step_us "$p")" -v ks="$(field step_us "$k")" \
      -v pe="$(field zmq_rtt_us "$p")" -v ke="$(field zmq_rtt_us "$k")" -v kr="$(field ratio "$k")" \
      'BEGIN { printf "curve size=%d mode=%s plain_us=%.1f keys_us=%.1f vs_plain=%.2f echo_plain_us=%.1f echo_curve_us=%.1f vs_floor=%.2f\n", s, m, ps, ks, ps / ks, pe, ke, kr }'
  done
done
exit $status
