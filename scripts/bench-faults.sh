#!/usr/bin/env bash
# Fault-tolerance figures (docs/benchmarks.md):
#   1. failover time over --kills kills -9 of one of 3 servers (R = 2, 4 workers
#      pushing), at the defaults, and with keys (CURVE on every socket: reconnects
#      include the handshake); median and worst, from kill to the first push a new
#      owner acknowledged;
#   2. false deaths in a --soak-seconds run of 4 workers and 3 servers (MLP
#      training) at the defaults: the scheduler must declare nobody dead;
#   3. push+pull throughput of a 1 MiB dense table with R = 2 beside R = 1, in
#      the same sitting (3 servers, 1 worker, pipelined; a second line for the
#      combined call, mode=pushpull, whose reply comes from the head once the
#      chain acknowledged the push), and beside it the floor:
#      pskv-chain-floor, raw ZeroMQ in the same topology moving the same bytes
#      (R = 2 forwards each push to the next server), run after each pskv pair;
#      its R2_over_R1 is what any server could reach on this machine, and its
#      cpu_us the CPU of all four processes a step; its apply=1 line has every
#      holder of a push apply it to its own values (w -= lr g) too, as a
#      replica must.
# Usage: scripts/bench-faults.sh [--kills N] [--soak-seconds S] [--runs N]
#        [--only failover|soak|replication]
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
bin=${PSKV_BIN_DIR:-$top/build/bin}
export PSKV_BIN_DIR=$bin
kills=20
soak=600
runs=5
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --kills) kills=$2; shift 2 ;;
    --soak-seconds) soak=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "usage: $0 [--kills N] [--soak-seconds S] [--runs N] [--only failover|soak|replication]" >&2; exit 2 ;;
  esac
done
out=$(mktemp -d /tmp/pskv-bench-faults-XXXXXX)
trap 'pkill -KILL -f "$out/" 2>/dev/null; [ -n "${PSKV_KEEP_LOGS:-}" ] && echo "logs kept in $out" >&2 || rm -rf "$out"' EXIT
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.1f\n", (a[NR/2]+a[NR/2+1])/2}'; }
stamp_ms() { date -d "$(cut -c1-23 <<< "$1" | tr T ' ')Z" +%s%3N 2>/dev/null; }

# One kill: prints the failover time in ms, or nothing when the run failed.
one_kill() {
  local dir=$1; shift
  mkdir -p "$dir"
  "$here/launch-local.sh" --log-dir "$dir" --timeout 120 --servers 3 --workers 4 \
    --scheduler-opt=--replicas=2 "$@" -- --app check --rounds 2500 > "$dir/launch.out" 2>&1 &
  local lp=$! i
  for i in $(seq 200); do
    [ "$(cat "$dir"/worker-*.log 2>/dev/null | grep -c 'joined job')" -ge 4 ] && break
    sleep 0.1
  done
  sleep 0.$((3 + RANDOM % 5))
  local t0; t0=$(date +%s%3N)
  kill -KILL "$(cat "$dir/server-$((RANDOM % 3)).pid")"
  wait $lp || { echo "bench-faults: a run failed: $(grep -h FAILED "$dir"/launch.out | head -n 2)" >&2; return; }
  local first="" line t
  while read -r line; do
    t=$(stamp_ms "$line")
    [ -n "$t" ] && { [ -z "$first" ] || [ "$t" -lt "$first" ]; } && first=$t
  done < <(grep -h 'failover: first push' "$dir"/worker-*.log)
  [ -n "$first" ] && echo $((first - t0))
}

failover() {
  local name=$1; shift
  local k f
  : > "$out/$name"
  for k in $(seq "$kills"); do
    f=$(one_kill "$out/$name-$k" "$@")
    [ -n "$f" ] && echo "$f" >> "$out/$name"
    rm -rf "$out/$name-$k"
  done
  local n; n=$(wc -l < "$out/$name")
  echo "failover settings=$name kills=$n median_ms=$(median < "$out/$name") worst_ms=$(sort -n "$out/$name" | tail -n 1) all_ms=$(sort -n "$out/$name" | tr '\n' ' ')"
}

if [ -z "$only" ] || [ "$only" = failover ]; then
  failover default
  failover "default+keys" --keys "$out/keys"
fi

if [ -z "$only" ] || [ "$only" = soak ]; then
  d=$out/soak
  mkdir -p "$d"
  "$here/launch-local.sh" --log-dir "$d" --timeout $((soak + 60)) --servers 3 --workers 4 \
    --scheduler-opt=--replicas=2 \
    -- --app mlp --epochs 1000 --batch 32 --lr 0.01 --lr-schedule const > "$d/launch.out" 2>&1 &
  lp=$!
  sleep "$soak"
  deaths=$(grep -c 'marked dead' "$d/scheduler.log")
  lapses=$(cat "$d"/server-*.log | grep -c 'lease lapsed')
  epochs=$(grep -c 'epoch [0-9]* summary\|^epoch' "$d/worker-0.log")
  kill -INT $lp 2>/dev/null; wait $lp 2>/dev/null
  echo "soak seconds=$soak servers=3 workers=4 defaults false_deaths=$deaths lease_lapses=$lapses"
fi

if [ -z "$only" ] || [ "$only" = replication ]; then
  for r in $(seq "$runs"); do
    for R in 1 2; do
      d=$out/repl-$R-$r
      "$here/launch-local.sh" --log-dir "$d" --timeout 600 --servers 3 --workers 1 \
        --scheduler-opt=--replicas=$R --server-opt=--log-level=warn \
        -- --app bench --size 1048576 --runs 3 --log-level warn > /dev/null 2>&1 ||
        { echo "bench-faults: replication run R=$R failed" >&2; continue; }
      sed -n 's/^bench size=1048576 mode=pipelined step_us=\([0-9.]*\).*/\1/p' "$d/worker-0.log" >> "$out/step-$R"
      sed -n 's/^bench size=1048576 mode=pushpull step_us=\([0-9.]*\).*/\1/p' "$d/worker-0.log" >> "$out/pp-$R"
    done
    for R in 1 2; do
      for a in 0 1; do
        line=$("$bin/pskv-chain-floor" --replicas $R --size 1048576 --apply $a) ||
          { echo "bench-faults: pskv-chain-floor --replicas $R --apply $a failed" >&2; continue; }
        sed -n 's/.* step_us=\([0-9.]*\).*/\1/p' <<< "$line" >> "$out/floor$a-$R"
        sed -n 's/.* cpu_us=\([0-9.]*\).*/\1/p' <<< "$line" >> "$out/floor$a-cpu-$R"
      done
    done
  done
  s1=$(median < "$out/step-1"); s2=$(median < "$out/step-2")
  line() { awk -v m="$1" -v a="$2" -v b="$3" 'BEGIN { printf "replication size=1048576 mode=%s R1_step_us=%.1f R1_GBps=%.3f R2_step_us=%.1f R2_GBps=%.3f R2_over_R1=%.2f\n", m, a, 2*1048576/(a*1000), b, 2*1048576/(b*1000), a/b }'; }
  line pipelined "$s1" "$s2"
  if [ -s "$out/pp-1" ] && [ -s "$out/pp-2" ]; then
    line pushpull "$(median < "$out/pp-1")" "$(median < "$out/pp-2")"
  fi
  for a in 0 1; do
    [ -s "$out/floor$a-1" ] && [ -s "$out/floor$a-2" ] || continue
    f1=$(median < "$out/floor$a-1"); f2=$(median < "$out/floor$a-2")
    c1=$(median < "$out/floor$a-cpu-1"); c2=$(median < "$out/floor$a-cpu-2")
    awk -v a="$f1" -v b="$f2" -v c="$c1" -v e="$c2" -v u="$a" 'BEGIN { printf "replication_floor size=1048576 mode=pipelined raw=zeromq apply=%d R1_step_us=%.1f R2_step_us=%.1f R2_over_R1=%.2f R1_cpu_us=%.0f R2_cpu_us=%.0f cpu_R1_over_R2=%.2f\n", u, a, b, a/b, c, e, c/e }'
  done
fi
