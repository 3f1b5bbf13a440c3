#!/usr/bin/env bash
# Push/pull benchmark: dense table, 1 server, 1 worker, BLAS on one thread, beside
# the raw ZeroMQ round trip (pskv-zmq-rtt --own-io: each side in its own ZeroMQ
# context, as the worker and the server in two processes are) measured in the same
# run: the bench app runs it just before each of its runs, so every run has its own
# baseline. One line
# per size and shape:
#   size=BYTES mode=serial|pipelined|pushpull step_us=... GBps=... zmq_rtt_us=... ratio=...
# (pushpull: pskv_pushpull, one round trip a step carrying the push and the weights
# after it; its line, over TCP without keys, ends apply_floor_us=... of_apply=...:
# the echo whose echo side checks the values, applies them to a table and sends the
# table back, pskv-zmq-rtt --apply, the median of 3 runs taken after pskv's, and that
# over pskv's step: the floor of a combined call, which must apply the push before
# its reply can go)
# step_us and zmq_rtt_us are medians over the runs; GBps = 2 x size / step (10^9
# bytes/s); ratio = the median over runs of the run's raw round trip / pskv step.
# With --keys the job runs with CURVE on every socket (a keyset made for the run) and
# the baseline is the CURVE echo (pskv-zmq-rtt --curve, the crypto floor); lines end
# with keys=curve.
# With --metrics every daemon serves /metrics (--metrics-port) and a scraper fetches
# each endpoint once a second for the whole run (as a Prometheus would); lines end with
# metrics=scraped. scripts/bench-metrics.sh compares the two.
# With --shm the worker moves values of 64 KiB and more through shared memory (its
# --shm); lines end with shm=1 (the baseline stays the TCP round trip).
# With --view every pull goes into a view of the library's (the bench's --pull view:
# pskv_pull_view, pskv_pushpull with PSKV_PP_VIEW; over TCP read in the received
# frame), released each step; lines end with view=1.
# Usage: scripts/bench-pushpull.sh [--sizes "4096 65536 1048576 16777216"] [--runs N (default 7)]
#        [--keys] [--metrics] [--shm] [--view]
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=${PSKV_BIN_DIR:-$here/../build/bin}
sizes="4096 65536 1048576 16777216"
runs=7
keys=
metrics=
shm=
view=
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) sizes=$2; shift 2 ;;
    --sizes=*) sizes=${1#*=}; shift ;;
    --runs) runs=$2; shift 2 ;;
    --runs=*) runs=${1#*=}; shift ;;
    --keys) keys=1; shift ;;
    --metrics) metrics=1; shift ;;
    --shm) shm=1; shift ;;
    --view) view=1; shift ;;
    *) echo "usage: $0 [--sizes \"BYTES...\"] [--runs N] [--keys] [--metrics] [--shm] [--view]" >&2; exit 2 ;;
  esac
done
export OPENBLAS_NUM_THREADS=1
out=$(mktemp -d /tmp/pskv-bench-XXXXXX)
scraper=
trap '[ -n "$scraper" ] && kill "$scraper" 2>/dev/null; rm -rf "$out"' EXIT
. "$here/free-port.sh"

# metric_opts: the --metrics-port options of one run (fresh ports) in mopts, the
# ports in mports; nothing without --metrics.
metric_opts() {
  mopts=() mports=()
  [ -n "$metrics" ] || return 0
  local ps pv pw
  ps=$(free_port) pv=$(free_port) pw=$(free_port)
  mports=("$ps" "$pv" "$pw")
  mopts=(--scheduler-opt --metrics-port --scheduler-opt "$ps" --server-opt --metrics-port
         --server-opt "$pv" --worker-opt "0:--metrics-port" --worker-opt "0:$pw")
}

# scrape PORTS...: every second, GET /metrics of each port (as a Prometheus would;
# one curl for all of them).
scrape() {
  local urls=() p
  for p in "$@"; do urls+=("http://127.0.0.1:$p/metrics"); done
  while :; do
    curl -s --max-time 1 "${urls[@]}" > /dev/null
    sleep 1
  done
}

status=0
keyopt=()
[ -n "$keys" ] && keyopt=(--keys "$out/keys")
for size in $sizes; do
  metric_opts
  if [ -n "$metrics" ]; then scrape "${mports[@]}" & scraper=$!; fi
  if ! "$here/launch-local.sh" --servers 1 --workers 1 --timeout 600 --log-dir "$out/run-$size" "${keyopt[@]}" "${mopts[@]}" \
       --server-opt --blas-threads --server-opt 1 --server-opt --log-level --server-opt warn \
       --scheduler-opt --log-level --scheduler-opt warn \
       -- --app bench --size "$size" --runs "$runs" --baseline "$bin/pskv-zmq-rtt" --log-level warn \
       ${shm:+--shm} ${view:+--pull view} > "$out/pskv-$size" 2>&1; then
    [ -n "$scraper" ] && kill "$scraper" 2>/dev/null && scraper=
    echo "bench: size $size failed; logs:" >&2
    tail -n 20 "$out/run-$size"/*.log >&2
    status=1
    continue
  fi
  if [ -n "$scraper" ]; then kill "$scraper" 2>/dev/null; wait "$scraper" 2>/dev/null; scraper=; fi
  for mode in serial pipelined pushpull; do
    line=$(grep "^bench size=$size mode=$mode " "$out/run-$size/worker-0.log")
    field() { echo "$line" | sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }
    step=$(field step_us) zmq=$(field zmq_rtt_us) ratio=$(field ratio)
    [ -n "$step" ] && [ -n "$zmq" ] && [ -n "$ratio" ] ||
      { echo "bench: no $mode figure for size $size" >&2; status=1; continue; }
    af=
    if [ "$mode" = pushpull ] && [ -z "$keys$shm" ] && [ $((size % 4)) -eq 0 ]; then
      af=$(for i in 1 2 3; do "$bin/pskv-zmq-rtt" --size "$size" --apply; done |
           sed -n 's/.* median_us=\([0-9.]*\).*/\1/p' | sort -g | sed -n 2p)
      [ -n "$af" ] && af=$(awk -v a="$af" -v st="$step" 'BEGIN { printf " apply_floor_us=%.1f of_apply=%.2f", a, a / st }')
    fi
    awk -v s="$size" -v m="$mode" -v st="$step" -v z="$zmq" -v r="$ratio" \
      -v k="$af${keys:+ keys=curve}${metrics:+ metrics=scraped}${shm:+ shm=1}${view:+ view=1}" \
      'BEGIN { printf "size=%d mode=%s step_us=%.1f GBps=%.3f zmq_rtt_us=%.1f ratio=%.2f%s\n", s, m, st, 2*s/(st*1000), z, r, k }'
  done
done
exit $status
