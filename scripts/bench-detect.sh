#!/usr/bin/env bash
# Failure-detection figures (docs/benchmarks.md, fault section), all at the defaults:
#   1. failover after kill -9 of one of 3 servers (R = 2, 4 workers pushing), --kills
#      kills: from the kill (wall clock just before it) to the scheduler's death line
#      ("detect") and to the first push a new owner acknowledged ("failover");
#      median and worst;
#   2. a SIGSTOP'd server (silent: no connection closes), --stops stops, --warmup s
#      into the job: from the stop to the death line; median and worst;
#   3. false deaths: an MLP run (3 servers R = 2, 4 workers) of --soak-seconds beside
#      8 and then 16 busy loops, and beside a memory-heavy neighbour (4 busy
#      loops, 2 processes zeroing 256 MiB over and over):
#      nodes declared dead, declared dead then heard from, the load average;
#   4. the heartbeats' cost: the scheduler's CPU per node per second (a job of 3
#      servers and 4 workers, 60 s), this build against --baseline-bin DIR (an older
#      build's); the bytes of a heartbeat are not measured here.
# Usage: scripts/bench-detect.sh [--kills N] [--stops N] [--warmup S] [--soak-seconds S]
#        [--baseline-bin DIR] [--only failover|stop|soak|cost]
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
bin=${PSKV_BIN_DIR:-$top/build/bin}
export PSKV_BIN_DIR=$bin
kills=20 stops=10 warmup=70 soak=600 only="" base=""
while [ $# -gt 0 ]; do
  case "$1" in
    --kills) kills=$2; shift 2 ;;
    --stops) stops=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --soak-seconds) soak=$2; shift 2 ;;
    --baseline-bin) base=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "usage: $0 [--kills N] [--stops N] [--warmup S] [--soak-seconds S] [--baseline-bin DIR] [--only failover|stop|soak|cost]" >&2; exit 2 ;;
  esac
done
out=$(mktemp -d /tmp/pskv-bench-detect-XXXXXX)
hogs=()
stop_hogs() { local p; for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; done; hogs=(); }
trap 'stop_hogs; pkill -KILL -f "$out/" 2>/dev/null; [ -n "${PSKV_KEEP_LOGS:-}" ] && echo "logs kept in $out" >&2 || rm -rf "$out"' EXIT
stamp_ms() { date -d "$(cut -c1-23 <<< "$1" | tr T ' ')Z" +%s%3N 2>/dev/null; }
stats() { sort -n | awk '{a[NR]=$1} END { if (!NR) { print "n=0"; exit } printf "n=%d median_ms=%s worst_ms=%s", NR, (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2), a[NR] }'; }
joined() { local i; for i in $(seq 600); do [ "$(cat "$1"/worker-*.log 2>/dev/null | grep -c 'joined job')" -ge "$2" ] && return 0; sleep 0.1; done; return 1; }
first_line_ms() { local l; l=$(grep -h -m 1 "$2" "$1" 2>/dev/null | head -n 1); [ -n "$l" ] && stamp_ms "$l"; }
loadavg() { cut -d' ' -f1 /proc/loadavg; }

if [ -z "$only" ] || [ "$only" = failover ]; then
  : > "$out/detect"; : > "$out/failover"
  for k in $(seq "$kills"); do
    d=$out/kill-$k
    "$here/launch-local.sh" --log-dir "$d" --timeout 150 --servers 3 --workers 4 \
      --scheduler-opt=--replicas=2 -- --app check --rounds 1000 > "$d.out" 2>&1 &
    lp=$!
    joined "$d" 4 || { echo "bench-detect: kill $k: workers did not join" >&2; kill $lp; wait $lp; continue; }
    sleep 0.$((3 + RANDOM % 5))
    t0=$(date +%s%3N)
    kill -KILL "$(cat "$d/server-$((RANDOM % 3)).pid")"
    wait $lp || { echo "bench-detect: kill $k: the run failed" >&2; continue; }
    t=$(first_line_ms "$d/scheduler.log" 'is dead (connection closed)') && echo $((t - t0)) >> "$out/detect"
    f=""; for w in "$d"/worker-*.log; do
      t=$(first_line_ms "$w" 'failover: first push') || continue
      { [ -z "$f" ] || [ "$t" -lt "$f" ]; } && f=$t
    done
    [ -n "$f" ] && echo $((f - t0)) >> "$out/failover"
    # where the time went: kill to the death line (and the probe that confirmed it),
    # to the new view, to the first push a new owner acknowledged
    t=$(first_line_ms "$d/scheduler.log" 'is dead (connection closed)') || t=""
    v=$(first_line_ms "$d/scheduler.log" 'replaced: view epoch') || v=""
    echo "kill9 k=$k dead_ms=$([ -n "$t" ] && echo $((t - t0))) view_ms=$([ -n "$v" ] && echo $((v - t0))) push_ms=$([ -n "$f" ] && echo $((f - t0))) $(grep -o -m 1 'closed ([0-9]* ms ago, probe [0-9]*)' "$d/scheduler.log") load=$(loadavg)"
    [ -n "${PSKV_KEEP_LOGS:-}" ] || rm -rf "$d" "$d.out"
  done
  echo "kill9 detect $(stats < "$out/detect") all_ms=$(sort -n "$out/detect" | tr '\n' ' ')"
  echo "kill9 failover $(stats < "$out/failover") all_ms=$(sort -n "$out/failover" | tr '\n' ' ') load=$(loadavg)"
fi

if [ -z "$only" ] || [ "$only" = stop ]; then
  : > "$out/stop"
  for k in $(seq "$stops"); do
    d=$out/stop-$k
    "$here/launch-local.sh" --log-dir "$d" --timeout $((warmup + 120)) --servers 3 --workers 3 \
      --scheduler-opt=--replicas=2 -- --app check --rounds 1000000 --slowdown 1.5 > "$d.out" 2>&1 &
    lp=$!
    joined "$d" 3 || { kill $lp; wait $lp; continue; }
    sleep "$warmup"
    pid=$(cat "$d/server-1.pid")
    # the stopped server's own death line (another node's, a false death of the
    # loaded warm-up, is counted apart)
    port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$d/server-1.log" | head -n 1)
    before=$(grep -c 'is dead' "$d/scheduler.log")
    t0=$(date +%s%3N)
    kill -STOP "$pid"
    for i in $(seq 100); do grep -q ":$port) is dead (silent" "$d/scheduler.log" && break; sleep 0.1; done
    kill -CONT "$pid"
    t=$(first_line_ms "$d/scheduler.log" ":$port) is dead (silent") && echo $((t - t0)) >> "$out/stop"
    echo "sigstop k=$k dead_ms=$([ -n "$t" ] && echo $((t - t0))) $(grep -o -m 1 ":$port) is dead (silent [0-9]* ms, phi [0-9.]*)" "$d/scheduler.log") other_deaths_before=$before load=$(loadavg)"
    kill -INT $lp 2>/dev/null; wait $lp 2>/dev/null
    [ -n "${PSKV_KEEP_LOGS:-}" ] || rm -rf "$d" "$d.out"
  done
  echo "sigstop detect $(stats < "$out/stop") all_ms=$(sort -n "$out/stop" | tr '\n' ' ') warmup_s=$warmup load=$(loadavg)"
fi

# longest_gap LOG STATUS_JSON: the longest heartbeat gap the scheduler logged. It logs a
# gap only from half of --min-dead-after-ms on (`late heartbeat ...: N ms after the one
# before`); when none was that late, "<HALF" (a soak on a calm enough host has no line).
longest_gap() {
  local g min
  g=$(grep -o '[0-9]* ms after the one before' "$1" | sort -n | tail -n 1 | cut -d' ' -f1)
  min=$(grep -o '"min_dead_after_ms":[0-9]*' <<< "$2" | cut -d: -f2)
  echo "${g:-<$(( ${min:-800} / 2 ))}"
}

# soak NAME: the MLP run for --soak-seconds beside whatever runs now.
soak_run() {
  local d=$out/soak-$1 lp l0
  l0=$(loadavg)
  "$here/launch-local.sh" --log-dir "$d" --timeout $((soak + 60)) --servers 3 --workers 4 \
    --scheduler-opt=--replicas=2 \
    -- --app mlp --epochs 1000 --batch 32 --lr 0.01 --lr-schedule const > "$d.out" 2>&1 &
  lp=$!
  sleep "$soak"
  local port js
  port=$(sed -n 's/.*scheduler listening on port \([0-9]*\).*/\1/p' "$d/scheduler.log" | head -n 1)
  js=$("$bin/pskvctl" --scheduler "127.0.0.1:$port" --timeout 30 status --json 2>/dev/null)
  # the run must still train: workers alive, none failed, epochs still counting
  local alive=0 w
  for w in "$d"/worker-*.pid; do kill -0 "$(cat "$w")" 2>/dev/null && alive=$((alive + 1)); done
  echo "soak beside=$1 seconds=$soak workers_alive=$alive/4" \
    "failed_requests=$(cat "$d"/worker-*.log | grep -c 'request [0-9]* failed')" \
    "epoch=$(grep -ho 'epoch [0-9.]* of' "$d/worker-0.log" | tail -n 1 | cut -d' ' -f2)" \
    "asked_again=$(cat "$d"/worker-*.log | grep -c 'asking again')" \
    "deaths=$(grep -c 'marked dead' "$d/scheduler.log")" \
    "dead_then_heard=$(grep -o '"declared_dead_then_heard":{[^}]*}' <<< "$js" | sed 's/.*{//; s/"//g')" \
    "late_heartbeats=$(grep -c 'late heartbeat' "$d/scheduler.log")" \
    "longest_gap_ms=$(longest_gap "$d/scheduler.log" "$js")" \
    "lease_lapses=$(cat "$d"/server-*.log | grep -c 'lease lapsed') load_start=$l0 load_end=$(loadavg)"
  kill -INT $lp 2>/dev/null; wait $lp 2>/dev/null
}

if [ -z "$only" ] || [ "$only" = soak ]; then
  for n in 8 16; do
    for i in $(seq $n); do sh -c 'while :; do :; done' & hogs+=($!); done
    soak_run "$n-busy-loops"
    stop_hogs
  done
  for i in 1 2 3 4; do sh -c 'while :; do :; done' & hogs+=($!); done
  for i in 1 2; do
    python3 -c 'while True: b = bytearray(256 << 20); b[::4096] = b"\1" * len(b[::4096]); del b' & hogs+=($!)
  done
  soak_run memory-neighbour
  stop_hogs
fi

# cost BIN NAME: the scheduler's CPU seconds per node per second over 60 s of a
# 3-server, 4-worker job that computes little (check --slowdown: heartbeats dominate).
cost_run() {
  local d=$out/cost-$2 lp pid c0 c1
  PSKV_BIN_DIR=$1 "$here/launch-local.sh" --log-dir "$d" --timeout 200 --servers 3 --workers 4 \
    -- --app check --rounds 1000000 --slowdown 20 > "$d.out" 2>&1 &
  lp=$!
  joined "$d" 4 || { kill $lp; return; }
  pid=$(cat "$d/scheduler.pid")
  c0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  sleep 60
  c1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  kill -INT $lp 2>/dev/null; wait $lp 2>/dev/null
  awk -v a="$c0" -v b="$c1" -v hz="$(getconf CLK_TCK)" -v n="$2" \
    'BEGIN { printf "cost build=%s scheduler_cpu_ms_per_node_per_s=%.3f (7 nodes, 60 s)\n", n, (b - a) / hz * 1000 / 7 / 60 }'
}

if [ -z "$only" ] || [ "$only" = cost ]; then
  cost_run "$bin" this
  [ -n "$base" ] && cost_run "$base" baseline
fi
