#!/usr/bin/env bash
# pskv-serve following a running namespace (issue 39), three figures:
#   cost   the training job's samples/s with pskv-serve following its namespace
#          against without (sparse-lr, 2 servers x 1 worker, adagrad; --app mlp: an
#          MLP 784-128-10 on Fashion-MNIST, batch 32, --epochs E), in pairs
#          whose order alternates (without first, then with first, ...): each pair's
#          ratio, their median and spread; and the CPU seconds the two training
#          servers used in each run (utime + stime from /proc/PID/stat, sampled
#          every 0.1 s until they exit), with against without: the job's work is
#          fixed, so this is what following costs the servers, free of the
#          neighbours' load that moves samples/s; pskv-serve's own CPU seconds
#   fresh  push acknowledged -> visible in /v1/lookup (test/tools/follow_fresh.py)
#   lookup /v1/lookup requests/s and p50/p99 under wrk while the job trains
#   scripts/bench-follow.sh [--runs N] [--examples N] [--seconds S] [--only cost,fresh,lookup]
#                           [--app sparse-lr|mlp] [--epochs E]
# Prints one line per pair, then one per figure.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
BIN=${PSKV_BIN_DIR:-$top/build/bin}
runs=3 examples=300000 secs=10 only=cost,fresh,lookup app=sparse-lr epochs=2
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --examples) examples=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --app) app=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    *) echo "bench-follow.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
for o in ${only//,/ }; do
  case $o in cost|fresh|lookup) ;; *) echo "bench-follow.sh: --only takes cost, fresh, lookup (got '$o')" >&2; exit 2 ;; esac
done
case $app in sparse-lr|mlp) ;; *) echo "bench-follow.sh: --app takes sparse-lr or mlp (got '$app')" >&2; exit 2 ;; esac
wants() { [[ ,$only, == *,$1,* ]]; }
work=$(mktemp -d)
spid=""
trap '[ -n "$spid" ] && kill "$spid" 2>/dev/null; rm -rf "$work"' EXIT
"$BIN/pskv-gen-sparse" --examples "$examples" --features 100000 --out "$work/gen" --seed 7 > /dev/null
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
tck=$(getconf CLK_TCK)

# cpu_watch DIR N: the CPU seconds (utime + stime) the servers DIR/server-I.pid
# (I < N) used, each as last seen alive (polled every 0.1 s until all are gone),
# summed. Prints "-" when a pid file never came.
cpu_watch() {
  local dir=$1 n=$2 i pid t alive
  local -a last pids
  for _ in $(seq 600); do [ -s "$dir/server-$((n - 1)).pid" ] && break; sleep 0.1; done
  for ((i = 0; i < n; i++)); do
    pids[i]=$(cat "$dir/server-$i.pid" 2>/dev/null) || { echo -; return; }
    last[i]=0
  done
  while :; do
    alive=0
    for ((i = 0; i < n; i++)); do
      t=$(awk '$3 != "Z" {print $14 + $15}' "/proc/${pids[i]}/stat" 2>/dev/null) || continue
      [ -n "$t" ] || continue
      alive=1
      ((t >= last[i])) && last[i]=$t
    done
    ((alive)) || break
    sleep 0.1
  done
  t=0
  for ((i = 0; i < n; i++)); do t=$((t + last[i])); done
  awk -v t="$t" -v k="$tck" 'BEGIN {printf "%.2f", t / k}'
}

# job MODE RUN: one training job; MODE follow runs pskv-serve beside it. Prints
# "samples/s servers-CPU-s pskv-serve-CPU-s" (the last "-" without the follower).
job() {
  local mode=$1 run=$2 sp hp d w scpu=-
  sp=$(port); hp=$(port); d=$work/$mode-$run
  mkdir -p "$d"
  local a=(--app sparse-lr --train "$work/gen.train" --batch 256 --updater adagrad --lr 0.05)
  [ "$app" = mlp ] && a=(--app mlp --hidden 128 --batch 32 --lr 0.01)
  "$top/scripts/launch-local.sh" --servers 2 --workers 1 --port "$sp" --timeout 600 --log-dir "$d" -- \
    "${a[@]}" --epochs "$epochs" --eval-every 0 --namespace bf > "$d.out" 2>&1 &
  local l=$!
  cpu_watch "$d" 2 > "$d.cpu" &
  w=$!
  if [ "$mode" = follow ]; then
    "$BIN/pskv-serve" --scheduler "127.0.0.1:$sp" --namespace bf --http-port "$hp" \
      --log-level warn > "$d.serve" 2>&1 &
    spid=$!
  fi
  wait "$l" || { echo "bench-follow.sh: the $mode job $run failed: $(tail -n 3 "$d.out")" >&2; exit 1; }
  wait "$w"
  if [ -n "$spid" ]; then # its CPU seconds (utime + stime), beside training on these cores
    scpu=$(awk -v t="$tck" '{printf "%.2f\n", ($14 + $15) / t}' "/proc/$spid/stat")
    kill "$spid"; wait "$spid" || true; spid=""
  fi
  echo "$(grep -o 'samples/s [0-9]*' "$d/worker-0.log" | tail -n 1 | awk '{print $2}') $(cat "$d.cpu") $scpu"
}

med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
minmax() { printf '%s\n' "$@" | sort -g | awk 'NR==1 {lo=$1} {hi=$1} END {print lo "-" hi}'; }
if wants cost; then
  ratios=() cpuratios=() base=() with=() bcpu=() wcpu=() scpus=()
  for r in $(seq "$runs"); do
    if ((r % 2)); then # the order alternates, so a drift of the load favours neither
      b=$(job none "$r"); f=$(job follow "$r"); order="without first"
    else
      f=$(job follow "$r"); b=$(job none "$r"); order="with first"
    fi
    read -r bs bc _ <<< "$b"
    read -r fs fc sc <<< "$f"
    base+=("$bs"); with+=("$fs"); bcpu+=("$bc"); wcpu+=("$fc"); scpus+=("$sc")
    ratios+=("$(awk -v w="$fs" -v b="$bs" 'BEGIN {printf "%.3f", w / b}')")
    cpuratios+=("$(awk -v w="$fc" -v b="$bc" 'BEGIN {printf "%.3f", w / b}')")
    echo "pair $r ($order): samples/s without $bs, with $fs: ratio ${ratios[-1]}; servers' CPU s without $bc, with $fc: ratio ${cpuratios[-1]}; pskv-serve CPU s $sc"
  done
  echo "cost ($app): samples/s ratio (with / without), median of $runs pairs $(med "${ratios[@]}") (spread $(minmax "${ratios[@]}")); ratio of medians $(awk -v w="$(med "${with[@]}")" -v b="$(med "${base[@]}")" 'BEGIN {printf "%.3f", w / b}') ($(med "${with[@]}") / $(med "${base[@]}"))"
  echo "cost ($app): servers' CPU seconds for the job, median without $(med "${bcpu[@]}"), with $(med "${wcpu[@]}"); paired ratio median $(med "${cpuratios[@]}") (spread $(minmax "${cpuratios[@]}")); pskv-serve's own CPU seconds median $(med "${scpus[@]}")"
fi

if wants fresh; then
  PSKV_LIB=$top/build/lib/libpskv.so /usr/bin/python3 "$top/test/tools/follow_fresh.py" --pushes 200 2> /dev/null |
    grep '^fresh:'
fi

wants lookup || exit 0
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
