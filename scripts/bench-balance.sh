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
# Every setting runs --repeat times (default 3) in interleaved rounds (one run of
# each per round, so that a change of load hits all alike) and the median is
# reported with each round's time: the machine may be shared. Usage: scripts/bench-balance.sh [--epochs E] [--repeat N]
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

# one LABEL SLOW_ARGS -- WORKER_ARGS...: run i of LABEL (i: the round); its times
# to 0.84 and 0.85, final accuracy and (a late slowdown) clocks to settle are
# appended to LABEL's files in $out
one() {
  local label=$1 slow=$2; shift 3
  local name=${label//[:+ ()]/-}-$i key=${label//[:+ ()]/-}
  # shellcheck disable=SC2086
  run "$name" $slow -- --app mlp --epochs "$epochs" "${fixed[@]}" --eval-every 0.25 \
    --metrics "$out/$name.jsonl" --log-level warn "$@" --balance-log "$out/$name.plan" || return 0
  to_acc 0.85 "$out/$name.jsonl" >> "$out/$key.t85"; echo >> "$out/$key.t85"
  to_acc 0.84 "$out/$name.jsonl" >> "$out/$key.t84"; echo >> "$out/$key.t84"
  grep -o 'final test accuracy [0-9.]*' "$out/$name/worker-0.log" | awk '{print $4}' >> "$out/$key.acc"
  if [ -s "$out/$name.plan" ] && [[ "$slow" == *slowdown-after* ]]; then
    awk -v h="$half" '$1 > h { last = $1 } END { print last ? last - h : "none" }' "$out/$name.plan" >> "$out/$key.settle"
  fi
}

# report LABEL: the medians over the rounds, and each round's time to 0.85
report() {
  local key=${1//[:+ ()]/-}
  printf '%-28s time_to_0.84_s=%-6s time_to_0.85_s=%-6s final_accuracy=%s rounds_to_0.85=[%s]' "$1" \
    "$(grep -v '^$' "$out/$key.t84" 2>/dev/null | median)" "$(grep -v '^$' "$out/$key.t85" 2>/dev/null | median)" \
    "$(grep -v '^$' "$out/$key.acc" 2>/dev/null | median)" "$(grep -v '^$' "$out/$key.t85" 2>/dev/null | tr '\n' ' ' | sed 's/ $//')"
  [ -s "$out/$key.settle" ] && printf ' clocks_to_settle=%s' "$(tr '\n' ' ' < "$out/$key.settle")"
  echo
}

steady="--worker-opt 2:--slowdown --worker-opt 2:3"
late="$steady --worker-opt 2:--slowdown-after --worker-opt 2:$half"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$repeat"); do # interleaved rounds: one run of each setting per round
  one "bsp" "$steady" -- --consistency bsp
  one "bsp --balance batch" "$steady" -- --consistency bsp --balance batch
  one "allreduce --balance batch" "$steady" -- --sync allreduce --balance batch
  one "async" "$steady" -- --consistency async
  one "ssp:2" "$steady" -- --consistency ssp:2
  one "bsp (late)" "$late" -- --consistency bsp
  one "bsp --balance batch (late)" "$late" -- --consistency bsp --balance batch
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== steady straggler: worker 2 is 3x slower; $epochs epochs, median of $repeat interleaved rounds"
for l in "bsp" "bsp --balance batch" "allreduce --balance batch" "async" "ssp:2"; do report "$l"; done
echo "== worker 2 slows to 3x at step $half of $steps"
for l in "bsp (late)" "bsp --balance batch (late)"; do report "$l"; done
echo "logs in $out"
