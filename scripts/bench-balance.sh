#!/usr/bin/env bash
# Load-balancing benchmark (the straggler setting of bench-consistency.sh:
# Fashion-MNIST MLP 784-256-10, 1 server, 3 workers, batch 32 a worker, SGD lr 0.01
# momentum 0.9, one BLAS thread per process, worker 2 three times slower):
#  1. steady straggler: wall time to 0.84 and 0.85 test accuracy (6 epochs: bsp's
#     global batch of 96 takes more epochs than async to 0.85) and final accuracy for bsp,
#     bsp --balance batch, --sync allreduce --balance batch, async and ssp:2;
#  2. a worker that slows halfway (--slowdown-after half the steps): the same for
#     bsp and bsp --balance batch, and the clocks from the slowdown to the last
#     re-split after it (the batches settled), from the --balance-log.
# Every run is repeated --repeat times (default 3) and the median reported: the
# machine may be shared. Usage: scripts/bench-balance.sh [--epochs E] [--repeat N]
# [--out DIR]
set -u
here=$(cd "$(dirname "$0")" && pwd)
epochs=6
repeat=3
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) epochs=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 [--epochs E] [--repeat N] [--out DIR]" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || out=$(mktemp -d /tmp/pskv-bench-balance-XXXXXX)
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=1
fixed=(--batch 32 --lr 0.01 --lr-schedule const --momentum 0.9)
steps=$((60000 / 96 * epochs)) # the balanced runs' clocks (global batch 96)
half=$((steps / 2))

run() { # run NAME LAUNCH_ARGS... -- WORKER_ARGS...
  local name=$1; shift
  "$here/launch-local.sh" --servers 1 --workers 3 --timeout 900 --log-dir "$out/$name" \
    --scheduler-opt --log-level --scheduler-opt warn --server-opt --log-level --server-opt warn \
    "$@" > /dev/null 2>&1 || { echo "bench-balance: $name failed; logs in $out/$name" >&2; return 1; }
}

to_acc() { # to_acc A FILE: seconds until the first evaluation at or above A (empty: not reached)
  awk -v want="$1" -F'[:,}]' '{ for (i = 1; i < NF; i++) { if ($i ~ /"time"/) t = $(i + 1); if ($i ~ /"accuracy"/) a = $(i + 1) }
                   if (a >= want && !done) { printf "%.1f", t; done = 1 } }' "$2"
}

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2); else print "-" }'; }

bench() { # bench LABEL SLOW_ARGS -- WORKER_ARGS...: median time to 0.85 and final accuracy
  local label=$1 slow=$2; shift 3
  local i name times="" t84="" accs="" settle=""
  for i in $(seq "$repeat"); do
    name=${label//[:+ ]/-}-$i
    # shellcheck disable=SC2086
    run "$name" $slow -- --app mlp --epochs "$epochs" "${fixed[@]}" --eval-every 0.25 \
      --metrics "$out/$name.jsonl" --log-level warn "$@" --balance-log "$out/$name.plan" || continue
    times+="$(to_acc 0.85 "$out/$name.jsonl")"$'\n'
    t84+="$(to_acc 0.84 "$out/$name.jsonl")"$'\n'
    accs+="$(grep -o 'final test accuracy [0-9.]*' "$out/$name/worker-0.log" | awk '{print $4}')"$'\n'
    if [ -s "$out/$name.plan" ] && [[ "$slow" == *slowdown-after* ]]; then
      settle+="$(awk -v h="$half" '$1 > h { last = $1 } END { print last ? last - h : "none" }' "$out/$name.plan")"$'\n'
    fi
  done
  printf '%-28s time_to_0.84_s=%-6s time_to_0.85_s=%-6s final_accuracy=%s' "$label" \
    "$(grep -v '^$' <<< "$t84" | median)" "$(grep -v '^$' <<< "$times" | median)" \
    "$(grep -v '^$' <<< "$accs" | median)"
  [ -n "$settle" ] && printf ' clocks_to_settle=%s' "$(grep -v '^$' <<< "$settle" | tr '\n' ' ')"
  echo
}

steady="--worker-opt 2:--slowdown --worker-opt 2:3"
late="$steady --worker-opt 2:--slowdown-after --worker-opt 2:$half"
echo "== steady straggler: worker 2 is 3x slower; $epochs epochs, median of $repeat"
bench "bsp" "$steady" -- --consistency bsp
bench "bsp --balance batch" "$steady" -- --consistency bsp --balance batch
bench "allreduce --balance batch" "$steady" -- --sync allreduce --balance batch
bench "async" "$steady" -- --consistency async
bench "ssp:2" "$steady" -- --consistency ssp:2
echo "== worker 2 slows to 3x at step $half of $steps"
bench "bsp (late)" "$late" -- --consistency bsp
bench "bsp --balance batch (late)" "$late" -- --consistency bsp --balance batch
echo "logs in $out"
