#!/usr/bin/env bash
# Across (namespaced) hosts: needs root. Uses scripts/netns-cluster.sh (3 hosts).
#  1. rejoin time after a 5 s cut of a worker's host: from the heal to the scheduler
#     seeing the worker alive again and to its next finished clock, over --trials;
#  2. push+pull at 1 MiB (bench app, pipelined and serial) with the server on h2 and
#     the worker on h3, against the same on loopback, and through a fault proxy that
#     adds 100 ms each way.
# Every run has CURVE on: launch-hosts.sh makes a keyset per job (its default), and the
# loopback run uses one too (launch-local.sh --keys), so the figures compare alike.
# Usage: scripts/bench-hosts.sh [--trials N]
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=${PSKV_BIN_DIR:-$here/../build/bin}
trials=3
while [ $# -gt 0 ]; do
  case "$1" in
    --trials) trials=$2; shift 2 ;;
    *) echo "usage: $0 [--trials N]" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench-hosts: needs root (network namespaces); skipped"; exit 0; }
out=$(mktemp -d /tmp/pskv-bench-hosts-XXXXXX)
trap '"$here/netns-cluster.sh" down > /dev/null 2>&1; rm -rf "$out"' EXIT
"$here/netns-cluster.sh" up 3 > /dev/null || { echo "bench-hosts: cannot create hosts" >&2; exit 1; }
ssh=(--ssh-opt -F --ssh-opt /tmp/pskv-netns/ssh_config)
export OPENBLAS_NUM_THREADS=1

echo "== rejoin after a 5 s cut of worker 2's host (ssp:2)"
printf '%s\n' 'h1 scheduler servers=1 workers=1' 'h2 servers=1 workers=1' 'h3 workers=1' > "$out/hosts"
for t in $(seq "$trials"); do
  log=$out/rejoin-$t
  "$here/launch-hosts.sh" --hostfile "$out/hosts" "${ssh[@]}" --bin-dir "$bin" --timeout 300 \
    --log-dir "$log" -- --app check --consistency ssp:2 --count-acked --rounds 1500 --check-keys 100 \
    --slowdown 3 > /dev/null 2>&1 &
  lpid=$!
  for i in $(seq 200); do grep -q 'joined job' "$log/worker-2.log" 2>/dev/null && break; sleep 0.1; done
  sleep 1
  "$here/netns-cluster.sh" cut h3 > /dev/null
  sleep 5
  "$here/netns-cluster.sh" heal h3 > /dev/null
  heal=$(date +%s.%N)
  wait $lpid; rc=$?
  back=$(grep 'alive again' "$log/scheduler.log" | tail -n 1 | awk '{print $1}')
  if [ -n "$back" ]; then
    awk -v h="$heal" -v b="$(date -d "$back" +%s.%N)" -v t="$t" -v rc="$rc" \
      'BEGIN { printf "trial=%d rejoin_s=%.2f (heal to alive again in the scheduler) run_status=%d\n", t, b - h, rc }'
  else
    echo "trial=$t rejoin: never seen alive again (status $rc)"
  fi
done

echo "== push+pull of 1 MiB values (CURVE keys on every socket)"
bench() { # bench NAME LAUNCH... -> pskv lines
  grep -h '^bench size' "$1"/worker-0.log | sed "s/^bench /$2 /"
}
"$here/launch-local.sh" --servers 1 --workers 1 --timeout 300 --log-dir "$out/loop" \
  --keys "$out/loop-keys" -- --app bench --size 1048576 --runs 3 --log-level warn > /dev/null 2>&1
bench "$out/loop" "loopback"
printf '%s\n' 'h1 scheduler' 'h2 servers=1 port=7800' 'h3 workers=1' > "$out/hosts2"
"$here/launch-hosts.sh" --hostfile "$out/hosts2" "${ssh[@]}" --bin-dir "$bin" --timeout 300 \
  --log-dir "$out/across" -- --app bench --size 1048576 --runs 3 --log-level warn > /dev/null 2>&1
bench "$out/across" "across-hosts"
"$here/netns-cluster.sh" exec h2 "$bin/pskv-faultproxy" --listen 10.213.0.12:7900 \
  --target 10.213.0.12:7800 --delay-ms 100 > "$out/proxy.log" 2>&1 &
sleep 0.3
"$here/launch-hosts.sh" --hostfile "$out/hosts2" "${ssh[@]}" --bin-dir "$bin" --timeout 600 \
  --log-dir "$out/delay" --server-opt --advertise-port --server-opt 7900 \
  -- --app bench --size 1048576 --runs 3 --steps 20 --warmup 2 --log-level warn > /dev/null 2>&1
bench "$out/delay" "across-hosts+100ms"
pkill -f 'pskv-faultproxy --listen 10.213.0.12:7900'
