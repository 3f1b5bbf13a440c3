#!/usr/bin/env bash
# pskv-serve following a running namespace (issue 39), three figures:
#   cost   the training job's samples/s with pskv-serve following its namespace
#          against without (sparse-lr, 2 servers x 1 worker, adagrad; runs alternate;
#          the ratio of the medians, each pair's ratio, pskv-serve's CPU seconds)
#   fresh  push acknowledged -> visible in /v1/lookup (test/tools/follow_fresh.py)
#   lookup /v1/lookup requests/s and p50/p99 under wrk while the job trains
#   scripts/bench-follow.sh [--runs N] [--examples N] [--seconds S]
# Prints one line per figure.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
BIN=${PSKV_BIN_DIR:-$top/build/bin}
runs=3 examples=300000 secs=10
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --examples) examples=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    *) echo "bench-follow.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d)
spid=""
trap '[ -n "$spid" ] && kill "$spid" 2>/dev/null; rm -rf "$work"' EXIT
"$BIN/pskv-gen-sparse" --examples "$examples" --features 100000 --out "$work/gen" --seed 7 > /dev/null
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# job MODE RUN: one training job; MODE follow runs pskv-serve beside it. Prints samples/s.
job() {
  local mode=$1 run=$2 sp hp d
  sp=$(port); hp=$(port); d=$work/$mode-$run
  "$top/scripts/launch-local.sh" --servers 2 --workers 1 --port "$sp" --timeout 600 --log-dir "$d" -- \
    --app sparse-lr --train "$work/gen.train" --epochs 2 --batch 256 --updater adagrad --lr 0.05 \
    --eval-every 0 --namespace bf > "$d.out" 2>&1 &
  local l=$!
  if [ "$mode" = follow ]; then
    "$BIN/pskv-serve" --scheduler "127.0.0.1:$sp" --namespace bf --http-port "$hp" \
      --log-level warn > "$d.serve" 2>&1 &
    spid=$!
  fi
  wait "$l"
  if [ -n "$spid" ]; then # its CPU seconds (utime + stime), beside training on these cores
    awk -v t="$(getconf CLK_TCK)" '{printf "%.1f\n", ($14 + $15) / t}' "/proc/$spid/stat" \
      >> "$work/serve-cpu"
    kill "$spid"; wait "$spid" || true; spid=""
  fi
  grep -o 'samples/s [0-9]*' "$d/worker-0.log" | tail -n 1 | awk '{print $2}'
}

base=() with=()
for r in $(seq "$runs"); do
  base+=("$(job none "$r")")
  with+=("$(job follow "$r")")
done
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
b=$(med "${base[@]}"); w=$(med "${with[@]}")
echo "cost: samples/s without ${base[*]} (median $b), with pskv-serve following ${with[*]} (median $w), ratio $(awk -v w="$w" -v b="$b" 'BEGIN {printf "%.3f", w / b}')"
# each run with the follower against the run without just before it: the load drifts
# less within a pair than across the sitting
pairs=()
for i in "${!base[@]}"; do
  pairs+=("$(awk -v w="${with[$i]}" -v b="${base[$i]}" 'BEGIN {printf "%.3f", w / b}')")
done
echo "cost: paired ratios ${pairs[*]} (median $(med "${pairs[@]}")); pskv-serve CPU seconds per run $(tr '\n' ' ' < "$work/serve-cpu")"

PSKV_LIB=$top/build/lib/libpskv.so /usr/bin/python3 "$top/test/tools/follow_fresh.py" --pushes 200 2> /dev/null |
  grep '^fresh:'

# lookups under wrk while a job trains (a long one: 6 epochs)
command -v wrk > /dev/null || { echo "lookup: wrk is missing (apt-get install wrk)"; exit 0; }
sp=$(port); hp=$(port)
"$top/scripts/launch-local.sh" --servers 2 --workers 1 --port "$sp" --timeout 600 --log-dir "$work/wrk" -- \
  --app sparse-lr --train "$work/gen.train" --epochs 6 --batch 256 --updater adagrad --lr 0.05 \
  --eval-every 0 --namespace bf > "$work/wrk.out" 2>&1 &
l=$!
"$BIN/pskv-serve" --scheduler "127.0.0.1:$sp" --namespace bf --http-port "$hp" --threads 2 \
  --queue 1024 --log-level warn > "$work/wrk.serve" 2>&1 &
spid=$!
for _ in $(seq 300); do
  curl -sf -XPOST "http://127.0.0.1:$hp/v1/lookup" -d '{"table":"sparse-lr.w","keys":[1]}' > /dev/null && break
  sleep 0.1
done
python3 - "$work/look.lua" <<'PY'
import json, random, sys
r = random.Random(5)
body = json.dumps({"table": "sparse-lr.w", "keys": [r.randrange(1, 100000) for _ in range(30)]})
open(sys.argv[1], "w").write('wrk.method = "POST"\nwrk.body = %s\n' % json.dumps(body))
PY
out=$(wrk -t2 -c16 -d"${secs}s" --latency -s "$work/look.lua" "http://127.0.0.1:$hp/v1/lookup")
ms() { awk -v p="$1" '$1 == p { v = $2; if (v ~ /us$/) { sub(/us/, "", v); v /= 1000 }
  else if (v ~ /ms$/) sub(/ms/, "", v); else if (v ~ /s$/) { sub(/s/, "", v); v *= 1000 }
  printf "%.2f", v }' <<< "$out"; }
non2xx=$(awk '/Non-2xx/ {print $NF}' <<< "$out")
echo "lookup: $(awk '/^Requests\/sec/ {print $2}' <<< "$out") requests/s p50 $(ms 50%) ms p99 $(ms 99%) ms (30 keys a request, wrk -t2 -c16 -d${secs}s, 2 threads, training beside it; non-2xx ${non2xx:-0})"
kill "$l" 2>/dev/null || true
wait "$l" 2>/dev/null || true
