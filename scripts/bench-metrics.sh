#!/usr/bin/env bash
# The cost of the metrics endpoints: push+pull at one size (default 4 KiB), runs of
# scripts/bench-pushpull.sh without metrics and with --metrics (every daemon serving
# /metrics, each scraped once a second) alternating, ROUNDS of each, which goes first
# alternating too (so that a drift of the machine weighs on both). Prints each run's
# lines, then per mode the medians of step_us off and on and the cost in percent:
#   metrics size=4096 mode=serial off_us=... on_us=... cost_pct=...
# With --cpu it measures CPU time instead of wall time, which a busy machine disturbs
# far less: per round one job without and one with every daemon serving /metrics
# (scraped once a second by curl, whose own CPU is not counted), each the bench app at
# SIZE for --runs runs of both modes, the two jobs of a round at the same time; the
# user+system CPU time of the scheduler, server and worker together (bash's `times`
# over launch-local.sh, which waits for them) per push+pull step. The worker runs
# with --spin-us 0: spinning for a reply burns CPU in proportion to the wait, which
# the load of the machine sets, not the metrics. Prints one line per
# job, the round's ratio, then the medians (cost_pct: the median ratio's):
#   metrics-cpu size=4096 off_cpu_us=... on_cpu_us=... cost_pct=...
# With --instructions it counts instructions instead (valgrind's cachegrind, no cache
# simulation), which the load of the machine does not change: per round three jobs of
# the bench app (--mode both, --steps STEPS, worker not spinning) under valgrind, one
# without metrics, one with every daemon serving /metrics but nobody scraping, one
# scraped once a second (the scrapes counted); the instructions of scheduler, server
# and worker together per push+pull step. The counters' cost per step is on - off, a
# scrape's cost (scraped - on) / scrapes. Under valgrind a step takes ~50x longer, so
# the scraped job sees ~50x more scrapes per step than a real one: its cost
# (cost_pct_valgrind) bounds the real cost from above. cost_pct_native puts the
# scrapes at the rate a native job sees (one per second of the native step time,
# measured in the same round without valgrind). Medians over the rounds:
#   metrics-instr size=4096 off_per_step=... counters_per_step=... per_scrape=...
#     cost_pct_valgrind=... cost_pct_native=...
# Usage: scripts/bench-metrics.sh [--cpu | --instructions [--steps N (default 5000)]]
#          [--rounds N (default 5)] [--size BYTES] [--runs N (default 7)]
set -u
here=$(cd "$(dirname "$0")" && pwd)
rounds=5 size=4096 runs=7 cpu= instr= steps=5000
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu) cpu=1; shift ;;
    --instructions) instr=1; shift ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) echo "usage: $0 [--cpu | --instructions [--steps N]] [--rounds N] [--size BYTES] [--runs N]" >&2; exit 2 ;;
  esac
done
command -v curl > /dev/null || { echo "bench-metrics: curl is needed (scripts/install-deps.sh)" >&2; exit 2; }
out=$(mktemp /tmp/pskv-bench-metrics-XXXXXX)
trap 'rm -f "$out"' EXIT
. "$here/bench-lib.sh"
# cpu_job on|off: one bench job; prints its daemons' CPU us per push+pull step.
cpu_job() {
  local d mo=() sp=() pids=() p cpu steps
  d=$(mktemp -d /tmp/pskv-bench-metrics-cpu-XXXXXX)
  if [ "$1" = on ]; then
    for p in s v w; do sp+=("$(free_port)"); done
    mo=(--scheduler-opt --metrics-port --scheduler-opt "${sp[0]}" --server-opt --metrics-port
        --server-opt "${sp[1]}" --worker-opt "0:--metrics-port" --worker-opt "0:${sp[2]}")
    ( while :; do curl -s --max-time 1 "http://127.0.0.1:${sp[0]}/metrics" \
        "http://127.0.0.1:${sp[1]}/metrics" "http://127.0.0.1:${sp[2]}/metrics" > /dev/null
      sleep 1; done ) & pids+=($!)
  fi
  # times: the subshell's children (launch-local.sh and the daemons it waited for)
  cpu=$( ( OPENBLAS_NUM_THREADS=1 "$here/launch-local.sh" --servers 1 --workers 1 --timeout 600 \
             --log-dir "$d" "${mo[@]}" --server-opt --blas-threads --server-opt 1 \
             -- --app bench --size "$size" --runs "$runs" --spin-us 0 --log-level warn > "$d/out" 2>&1 || exit 1
           times ) | awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/);
                                    printf "%.6f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }')
  [ ${#pids[@]} -gt 0 ] && { kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null; }
  steps=$(sed -n 's/.* runs=\([0-9]*\) steps=\([0-9]*\).*/\1 \2/p' "$d/worker-0.log" |
          awk '{n += $1 * $2} END {print n + 0}')
  if [ -z "$cpu" ] || [ "$steps" -eq 0 ]; then
    echo "bench-metrics: the $1 job failed; logs in $d" >&2
    return 1
  fi
  rm -rf "$d"
  awk -v c="$cpu" -v n="$steps" -v m="$1" \
    'BEGIN { printf "metrics-cpu-run size='"$size"' metrics=%s cpu_s=%.3f steps=%d cpu_us=%.2f\n", m, c, n, 1e6 * c / n }'
}

# cpu_rounds: ROUNDS pairs of cpu_job, the two jobs of a pair running at the same
# time (so whatever else loads the machine weighs on both alike); per pair the
# ratio on/off, then the medians.
cpu_rounds() {
  local i a b ra rb
  for ((i = 1; i <= rounds; i++)); do
    a=$(mktemp /tmp/pskv-bench-metrics-off-XXXXXX) b=$(mktemp /tmp/pskv-bench-metrics-on-XXXXXX)
    if ((i % 2)); then # which starts first alternates
      cpu_job off > "$a" & ra=$!
      cpu_job on > "$b" & rb=$!
    else
      cpu_job on > "$b" & rb=$!
      cpu_job off > "$a" & ra=$!
    fi
    wait "$ra" && wait "$rb" || { rm -f "$a" "$b"; exit 1; }
    cat "$a" "$b" | tee -a "$out"
    awk -v x="$(sed 's/.*cpu_us=//' "$a")" -v y="$(sed 's/.*cpu_us=//' "$b")" \
      'BEGIN { printf "metrics-cpu-pair ratio=%.4f\n", y / x }' | tee -a "$out"
    rm -f "$a" "$b"
  done
  local off on ratio
  off=$(grep "metrics=off " "$out" | sed 's/.*cpu_us=//' | median)
  on=$(grep "metrics=on " "$out" | sed 's/.*cpu_us=//' | median)
  ratio=$(grep "metrics-cpu-pair " "$out" | sed 's/.*ratio=//' | median)
  awk -v s="$size" -v a="$off" -v b="$on" -v r="$ratio" \
    'BEGIN { printf "metrics-cpu size=%d off_cpu_us=%.2f on_cpu_us=%.2f cost_pct=%.1f (median of the pairs)\n", s, a, b, 100 * (r - 1) }'
}

# instr_job off|on|scraped DIR: one bench job under valgrind in DIR; prints
# "INSTRUCTIONS STEPS SCRAPES".
instr_job() {
  local d=$2 mo=() sp=() pid= p
  mkdir -p "$d/bin" "$d/vg"
  for p in "$BIN"/*; do ln -sf "$p" "$d/bin/"; done
  for p in pskv-scheduler pskv-server pskv-worker; do
    rm -f "$d/bin/$p"
    printf '#!/bin/sh\nexec valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null --log-file=%s/vg/%s.%%p %s/%s "$@"\n' \
      "$d" "$p" "$BIN" "$p" > "$d/bin/$p"
    chmod +x "$d/bin/$p"
  done
  if [ "$1" != off ]; then
    for p in s v w; do sp+=("$(free_port)"); done
    mo=(--scheduler-opt --metrics-port --scheduler-opt "${sp[0]}" --server-opt --metrics-port
        --server-opt "${sp[1]}" --worker-opt "0:--metrics-port" --worker-opt "0:${sp[2]}")
  fi
  if [ "$1" = scraped ]; then
    ( while :; do curl -s --max-time 1 "http://127.0.0.1:${sp[0]}/metrics" \
        "http://127.0.0.1:${sp[1]}/metrics" "http://127.0.0.1:${sp[2]}/metrics" > /dev/null &&
        echo >> "$d/scrapes"; sleep 1; done ) & pid=$!
  fi
  OPENBLAS_NUM_THREADS=1 "$here/launch-local.sh" --bin-dir "$d/bin" --servers 1 --workers 1 \
    --timeout 900 --log-dir "$d" "${mo[@]}" --scheduler-opt --dead-after-ms \
    --scheduler-opt 30000 --server-opt --blas-threads --server-opt 1 -- --app bench \
    --size "$size" --runs 1 --steps "$steps" --mode both --spin-us 0 --log-level warn \
    > "$d/out" 2>&1 || { [ -n "$pid" ] && kill "$pid"; echo "bench-metrics: the $1 job failed; logs in $d" >&2; return 1; }
  [ -n "$pid" ] && { kill "$pid"; wait "$pid" 2>/dev/null; }
  local n; n=$(sed -n 's/.*I *refs: *//p' "$d"/vg/* | tr -d , | awk '{s += $1} END {print s + 0}')
  local k; k=$(grep -h '^bench size=' "$d/out" | sed -n 's/.* steps=\([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}')
  echo "$n $k $( [ -f "$d/scrapes" ] && wc -l < "$d/scrapes" || echo 0)"
}

# instr_rounds: ROUNDS of (native step time, off, on, scraped), then the medians.
instr_rounds() {
  command -v valgrind > /dev/null ||
    { echo "bench-metrics: --instructions needs valgrind (apt-get install valgrind)" >&2; exit 2; }
  BIN=${PSKV_BIN_DIR:-$(cd "$here/.." && pwd)/build/bin}
  local i d off on sc nat
  for ((i = 1; i <= rounds; i++)); do
    d=$(mktemp -d /tmp/pskv-bench-metrics-instr-XXXXXX)
    nat=$("$here/bench-pushpull.sh" --sizes "$size" --runs 3 2>/dev/null | grep 'mode=serial ' |
          sed 's/.*step_us=\([0-9.]*\).*/\1/')
    off=$(instr_job off "$d/off") && on=$(instr_job on "$d/on") && sc=$(instr_job scraped "$d/sc") || exit 1
    awk -v a="$off" -v b="$on" -v c="$sc" -v nat="$nat" -v s="$size" 'BEGIN {
      split(a, x, " "); split(b, y, " "); split(c, z, " ")
      po = x[1] / x[2]; pn = y[1] / y[2]; pz = z[1] / z[2]
      scrape = z[3] ? (z[1] - y[1] * z[2] / y[2]) / z[3] : 0
      printf "metrics-instr-round size=%d off_per_step=%.0f on_per_step=%.0f scraped_per_step=%.0f counters_per_step=%.0f scrapes=%d per_scrape=%.0f native_step_us=%s cost_pct_valgrind=%.3f cost_pct_native=%s\n",
        s, po, pn, pz, pn - po, z[3], scrape, nat == "" ? "-" : nat, 100 * (pz - po) / po,
        nat == "" ? "-" : sprintf("%.3f", 100 * (pn - po + scrape * nat * 1e-6) / po) }' | tee -a "$out"
    rm -rf "$d"
  done
  local f line="metrics-instr size=$size rounds=$rounds"
  for f in off_per_step counters_per_step per_scrape native_step_us cost_pct_valgrind cost_pct_native; do
    line+=" $f=$(sed -n "s/.* $f=\([-0-9.]*\).*/\1/p" "$out" | median)"
  done
  echo "$line (medians)"
}

[ -n "$cpu" ] && { cpu_rounds; exit; }
[ -n "$instr" ] && { instr_rounds; exit; }
for ((i = 1; i <= rounds; i++)); do
  order=("" --metrics)
  ((i % 2 == 0)) && order=(--metrics "")
  for m in "${order[@]}"; do
    "$here/bench-pushpull.sh" --sizes "$size" --runs "$runs" $m | tee -a "$out" || exit 1
  done
done
for mode in serial pipelined; do
  off=$(grep "mode=$mode " "$out" | grep -v metrics=scraped | sed 's/.*step_us=\([0-9.]*\).*/\1/' | median)
  on=$(grep "mode=$mode " "$out" | grep metrics=scraped | sed 's/.*step_us=\([0-9.]*\).*/\1/' | median)
  awk -v s="$size" -v m="$mode" -v a="$off" -v b="$on" \
    'BEGIN { printf "metrics size=%d mode=%s off_us=%.1f on_us=%.1f cost_pct=%.1f\n", s, m, a, b, 100 * (b - a) / a }'
done
