#!/usr/bin/env bash
# Sparse push throughput per server core, the memory per key and the push
# latency while a sparse table grows: 1 server x 2 workers, `--app sparse-bench`
# (a width-1 table, --rows random 64-bit keys filled from empty, then as many
# random updates), the server's CPU time (utime + stime of every thread, from
# /proc/PID/stat) and resident memory read between the phases; then the floor, a
# bare hash map updated in a loop in one process (pskv-hashmap-floor), in the same
# run. Per run:
#   sparse-push run= updater= rows= fill_keys_per_cpu_s= update_keys_per_cpu_s=
#     floor_update_keys_per_s= ratio= fill_max_push_ms= server_longest_push_cpu_ms=
#     rss_bytes_per_key= rss_after_updates_per_key= ...
# (ratio: pskv's update keys per server CPU second over the floor's; the longest
# push: the server's own count of the most CPU time one push took, which a
# loaded machine does not inflate as it does the workers' wall-clock latency),
# then medians.
# --witness runs beside each run, for its whole length, the bare loop of
# `pskv-grow-bench --floor` (random misses over arrays of the table's size, no
# system call), a batch of 8,192 "keys" every 5 ms, and adds its longest batch
# (witness_longest_ms=) and p99 (witness_p99_ms=) of CPU time: the machine's own
# bursts, the floor under the server's longest push measured beside it.
# Usage: scripts/bench-sparse-push.sh [--rows N] [--runs R] [--updater U] [--steps S] [--witness]
#   U: sgd (default) or ftrl (run with --l1 0, so that every row is stored)
#   S: update pushes (of 8192 keys) per worker (default: --rows keys in all)
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=${PSKV_BIN_DIR:-$here/../build/bin}
rows=10000000 runs=3 updater=sgd steps=0 witness=0
while [ $# -gt 0 ]; do
  case "$1" in
    --rows) rows=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --updater) updater=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --witness) witness=1; shift ;;
    *) echo "usage: $0 [--rows N] [--runs R] [--updater sgd|ftrl] [--steps S] [--witness]" >&2; exit 2 ;;
  esac
done
case "$updater" in
  sgd) uflags=(--updater sgd --lr 0.01 --momentum 0) ;;
  ftrl) uflags=(--updater ftrl --l1 0) ;;
  *) echo "bench-sparse-push: --updater must be sgd or ftrl" >&2; exit 2 ;;
esac
out=$(mktemp -d /tmp/pskv-bench-sparse-push-XXXXXX)
trap 'rm -rf "$out"; [ -n "${wpid:-}" ] && kill "$wpid" 2>/dev/null' EXIT

# cpu_s PID: seconds of CPU time (user + system, every thread) the process used
cpu_s() {
  awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); print ($12 + $13) / hz }' "/proc/$1/stat"
}
rss_b() { awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$1/status"; }
# wait_for FILE TEXT: until FILE holds TEXT (at most 1200 s)
wait_for() {
  for _ in $(seq 12000); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "bench-sparse-push: '$2' never appeared in $1" >&2; return 1
}

for r in $(seq "$runs"); do
  logs="$out/logs-$r" go="$out/go-$r"
  mkdir -p "$logs"
  wpid=
  if [ "$witness" = 1 ]; then
    "$bin/pskv-grow-bench" --floor --rows "$rows" --pace 5 --until "$out/stop-$r" > "$out/witness-$r" &
    wpid=$!
  fi
  "$here/launch-local.sh" --servers 1 --workers 2 --timeout 1800 --log-dir "$logs" \
    --scheduler-opt --log-level --scheduler-opt warn \
    -- --app sparse-bench --rows "$rows" --push-keys 8192 --steps "$steps" "${uflags[@]}" \
       --request-timeout 120 --replay-wait "$go" > /dev/null 2>&1 &
  launcher=$!
  wait_for "$logs/worker-0.log" "waiting for $go.1" && wait_for "$logs/worker-1.log" "waiting for $go.1" ||
    { kill "$launcher"; wait "$launcher"; tail -n 5 "$logs"/*.log >&2; exit 1; }
  spid=$(cat "$logs/server-0.pid")
  c1=$(cpu_s "$spid") rss=$(rss_b "$spid")
  touch "$go.1"
  wait_for "$logs/worker-0.log" "waiting for $go.2" && wait_for "$logs/worker-1.log" "waiting for $go.2" ||
    { kill "$launcher"; wait "$launcher"; tail -n 5 "$logs"/*.log >&2; exit 1; }
  c2=$(cpu_s "$spid") rss2=$(rss_b "$spid")
  touch "$go.2"
  wait "$launcher" || { echo "bench-sparse-push: the job failed" >&2; tail -n 5 "$logs"/*.log >&2; exit 1; }
  wlong=- wp99=-
  if [ -n "$wpid" ]; then
    touch "$out/stop-$r"
    wait "$wpid"
    wlong=$(sed -n 's/.* longest_ms=\([0-9.]*\).*/\1/p' "$out/witness-$r")
    wp99=$(sed -n 's/.* p99_ms=\([0-9.]*\).*/\1/p' "$out/witness-$r")
  fi
  # the server's CPU before the fill (joining, opening the table) is a few ms: counted in
  upd_keys=$(sed -n 's/.*phase=update .* keys=\([0-9]*\) .*/\1/p' "$logs"/worker-*.log | awk '{ s += $1 } END { print s }')
  maxlat=$(sed -n 's/.*phase=fill .*max_push_ms=\([0-9.]*\).*/\1/p' "$logs"/worker-*.log | sort -g | tail -n 1)
  p99=$(sed -n 's/.*phase=fill .*p99_push_ms=\([0-9.]*\).*/\1/p' "$logs"/worker-*.log | sort -g | tail -n 1)
  # the server's own count: the most CPU time one push took (growth included)
  longest=$(sed -n "s/.*table 'sparse-bench': .*longest push \([0-9.]*\) ms of CPU.*/\1/p" "$logs/server-0.log")
  floor=$("$bin/pskv-hashmap-floor" --rows "$rows" --updates "$upd_keys")
  fl_upd=$(echo "$floor" | sed -n 's/.*phase=update .*keys_per_s=\([0-9]*\).*/\1/p')
  fl_fill=$(echo "$floor" | sed -n 's/.*phase=fill .*keys_per_s=\([0-9]*\).*/\1/p')
  fl_max=$(echo "$floor" | sed -n 's/.*max_batch_ms=\([0-9.]*\).*/\1/p')
  awk -v r="$r" -v u="$updater" -v rows="$rows" -v c1="$c1" -v c2="$c2" -v uk="$upd_keys" \
      -v rss="$rss" -v rss2="$rss2" -v fu="$fl_upd" -v ff="$fl_fill" -v fm="$fl_max" -v ml="$maxlat" -v p99="$p99" -v lg="${longest:-?}" -v wl="$wlong" -v wp="$wp99" \
      -v load="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
    fill = rows / c1; upd = uk / (c2 - c1)
    printf "sparse-push run=%d updater=%s rows=%d fill_cpu_s=%.2f fill_keys_per_cpu_s=%.0f", r, u, rows, c1, fill
    printf " update_keys=%.0f update_cpu_s=%.2f update_keys_per_cpu_s=%.0f floor_update_keys_per_s=%s", uk, c2 - c1, upd, fu
    printf " ratio=%.3f floor_fill_keys_per_s=%s fill_ratio=%.3f fill_max_push_ms=%s fill_p99_push_ms=%s server_longest_push_cpu_ms=%s", upd / fu, ff, fill / ff, ml, p99, lg
    printf " floor_max_batch_ms=%s witness_longest_ms=%s witness_p99_ms=%s", fm, wl, wp
    printf " rss_bytes=%.0f rss_bytes_per_key=%.1f rss_after_updates_per_key=%.1f load=%s\n", rss, rss / rows, rss2 / rows, load }'
done | tee "$out/runs.txt"
med() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" "$out/runs.txt" | sort -g |
  awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "sparse-push median updater=$updater rows=$rows update_keys_per_cpu_s=$(med update_keys_per_cpu_s)" \
  "floor_update_keys_per_s=$(med floor_update_keys_per_s) ratio=$(med ratio)" \
  "fill_keys_per_cpu_s=$(med fill_keys_per_cpu_s) fill_ratio=$(med fill_ratio)" \
  "fill_max_push_ms=$(med fill_max_push_ms) server_longest_push_cpu_ms=$(med server_longest_push_cpu_ms)" \
  "rss_bytes_per_key=$(med rss_bytes_per_key) rss_after_updates_per_key=$(med rss_after_updates_per_key)"
