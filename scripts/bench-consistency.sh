#!/usr/bin/env bash
# Consistency benchmark (Fashion-MNIST MLP 784-256-10, 1 server, 3 workers, batch 32,
# SGD lr 0.01 momentum 0.9, one BLAS thread per process):
#  1. steady straggler: worker 2 runs 3x slower; for bsp, bsp + 1 backup, ssp:2,
#     ssp:8 and async: wall time to 0.85 test accuracy and the waiting fraction
#     (time blocked in the library over the training loop), plus a plot of test
#     accuracy against wall time for all five;
#  2. transient delays: every iteration 5x slower with probability 0.1 on every
#     worker; waiting fraction for bsp, ssp:2 and ssp:8, at batch 32 (the transfer
#     dominates) and at batch 1024 for 200 steps (compute dominates), the latter
#     beside the floor of the delay model itself (delay_floor: no transfer at all).
# Usage: scripts/bench-consistency.sh [--epochs E] [--out DIR] [-- EXTRA_WORKER_ARGS...]
# (extra arguments go to every worker, after the defaults: e.g. -- --batch 256 --lr 0.05)
set -u
here=$(cd "$(dirname "$0")" && pwd)
epochs=4
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) epochs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: $0 [--epochs E] [--out DIR] [-- WORKER_ARGS...]" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || out=$(mktemp -d /tmp/pskv-bench-consistency-XXXXXX)
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=1
# the fixed schedule of the figures in docs/benchmarks.md, not the mlp app's defaults;
# and without --prefetch (on by default under async and ssp since 2026-11-30): these
# figures compare the consistency models, and at this constant lr the prefetch's step
# of staleness costs async and ssp 0.015-0.025 of 4-epoch accuracy with the straggler
# (0.003-0.007 at the trainer's lr 0.0075 linear: docs/benchmarks.md)
fixed=(--batch 32 --lr 0.01 --lr-schedule const --momentum 0.9 --prefetch=false)

run() { # run NAME EXTRA_ARGS... -> metrics in $out/NAME.jsonl, logs in $out/NAME/
  local name=$1; shift
  "$here/launch-local.sh" --servers 1 --workers 3 --timeout 900 --log-dir "$out/$name" \
    --scheduler-opt --log-level --scheduler-opt warn --server-opt --log-level --server-opt warn \
    "$@" > /dev/null 2>&1 || { echo "bench-consistency: $name failed; logs in $out/$name" >&2; return 1; }
}

waiting() { # mean and per-worker waiting fraction of run NAME
  grep -h 'waiting fraction' "$out/$1"/worker-*.log |
    awk '{ f[$2] = $5; s += $5; n++ } END { printf "waiting=%.3f (", s / n; for (r = 0; r < n; r++) printf "%s%.3f", r ? " " : "", f[r]; printf ")" }'
}

to_085() { # seconds until the first evaluation at or above 0.85
  awk -F'[:,}]' '{ for (i = 1; i < NF; i++) { if ($i ~ /"time"/) t = $(i + 1); if ($i ~ /"accuracy"/) a = $(i + 1) }
                   if (a >= 0.85 && !done) { printf "%.1f", t; done = 1 } }
                 END { if (!done) printf "not reached (final %.4f)", a }' "$1"
}

echo "== steady straggler: worker 2 is 3x slower; $epochs epochs"
for m in bsp bsp+backup ssp:2 ssp:8 async; do
  args=(--consistency "${m%+backup}")
  [ "$m" = bsp+backup ] && args+=(--backup 1)
  name=straggler-${m//[:+]/-}
  run "$name" --worker-opt 2:--slowdown --worker-opt 2:3 -- --app mlp --epochs "$epochs" \
      "${fixed[@]}" --eval-every 0.25 --metrics "$out/$name.jsonl" --log-level warn "${args[@]}" "$@" || continue
  echo "model=$m time_to_0.85_s=$(to_085 "$out/$name.jsonl") $(waiting "$name") final_accuracy=$(grep -o 'final test accuracy [0-9.]*' "$out/$name/worker-0.log" | awk '{print $4}')"
done
if [ -x "$here/plot.sh" ]; then
  "$here/plot.sh" "$out"/straggler-*.jsonl -o "$out/straggler.png" > /dev/null 2>&1 &&
    echo "plot: $out/straggler.png"
fi

echo "== transient delays: every worker, each iteration 5x slower with probability 0.1"
for m in bsp ssp:2 ssp:8; do
  name=jitter-${m//:/-}
  run "$name" -- --app mlp --epochs 1 --eval-every 0 --jitter 0.1:5 --consistency "$m" \
      "${fixed[@]}" --log-level warn "$@" || continue
  echo "model=$m $(waiting "$name")"
done
# The waiting fraction of the delay model alone, for W workers, bound TAU (0 = bsp),
# each step 1 unit of compute or F units with probability P, STEPS steps: a worker
# starts step c once every worker has finished step c - TAU - 1, and nothing else
# costs time (no transfer, no server). Mean over 200 seeded runs. No implementation
# can wait less: it is the floor the measured fractions are to be read against.
delay_floor() { # delay_floor W TAU P F STEPS
  awk -v W="$1" -v tau="$2" -v p="$3" -v f="$4" -v steps="$5" -v runs=200 'BEGIN {
    for (s = 1; s <= runs; s++) {
      srand(s); delete fin
      for (w = 0; w < W; w++) { t[w] = 0; wt[w] = 0 }
      for (c = 0; c < steps; c++)
        for (w = 0; w < W; w++) {
          start = t[w]; need = c - tau - 1
          if (need >= 0) for (v = 0; v < W; v++) if (fin[v, need] > start) start = fin[v, need]
          wt[w] += start - t[w]; t[w] = start + (rand() < p ? f : 1); fin[w, c] = t[w]
        }
      m = 0; for (w = 0; w < W; w++) m += wt[w] / t[w]
      total += m / W
    }
    printf "%.3f", total / runs }'
}

echo "== transient delays, compute-dominated: batch 1024, 10 epochs (200 steps per worker)"
for m in bsp ssp:2 ssp:8; do
  name=jitter-compute-${m//:/-}
  run "$name" -- --app mlp --epochs 10 --eval-every 0 --jitter 0.1:5 --consistency "$m" \
      "${fixed[@]}" --batch 1024 --log-level warn || continue
  steps=$(sed -n 's/.*(\([0-9]*\) steps).*/\1/p' "$out/$name/worker-0.log" | tail -n 1)
  tau=0; [ "$m" = bsp ] || tau=${m#ssp:}
  echo "model=$m $(waiting "$name") delay_model_floor=$(delay_floor 3 "$tau" 0.1 5 "${steps:-200}") steps=${steps:-?}"
done
echo "results in $out"
