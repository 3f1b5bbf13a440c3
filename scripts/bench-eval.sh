#!/usr/bin/env bash
# Validation benchmarks (docs/benchmarks.md, "Validation alongside training"): MLP
# 784-256-10 on Fashion-MNIST, 2 servers x 2 workers, sgd lr 0.0075 const, momentum
# 0.9, batch 16, the last 10,000 training images held out (--validation-split 10000)
# in every run, so that every job trains on the same 50,000.
#   early:  a 30-epoch budget with the evaluator (--eval-every 1) and early stopping
#           on val_accuracy (patience 3), then the same job run to 30 epochs (the
#           evaluator watching, no early stopping): wall time, epochs, best val_accuracy.
#   cost:   the same 5-epoch job three ways, alternating, --runs times: blocking (rank 0
#           evaluates the test set every epoch, --eval-every 1, as before the evaluator),
#           with the evaluator (workers --eval-every 0), and with no validation at all;
#           wall time (medians) and each worker's time split (compute, push, wait, eval).
# The early pairs' learning rate, schedule, evaluation period, min delta and
# consistency can be set (--lr, --lr-schedule, --eval-every, --min-delta,
# --consistency; the cost runs keep 0.0075 const async): e.g. --lr 0.02 --lr-schedule
# exp:0.65 --consistency bsp, a schedule that decays per epoch whatever the budget, so
# that the job converges and plateaus, and bsp, under which the early run and the full
# one are the same run up to the stop (docs/benchmarks.md).
# Usage: scripts/bench-eval.sh [--runs N] [--only early|cost] [--pairs N] [--patience P]
#          [--lr LR] [--lr-schedule S] [--eval-every E] [--min-delta D] [--consistency C]
set -u
here=$(cd "$(dirname "$0")" && pwd)
runs=3 only="" pairs=1 patience=3 elr=0.0075 esched=const eevery=1 edelta=0 econs=async
usage() {
  echo "usage: $0 [--runs N] [--pairs N] [--only early|cost] [--patience P] [--lr LR]" \
    "[--lr-schedule S] [--eval-every E] [--min-delta D] [--consistency C]" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage
  case "$1" in
    --runs) runs=$2 ;;
    --pairs) pairs=$2 ;;
    --only) only=$2 ;;
    --patience) patience=$2 ;;
    --lr) elr=$2 ;;
    --lr-schedule) esched=$2 ;;
    --eval-every) eevery=$2 ;;
    --min-delta) edelta=$2 ;;
    --consistency) econs=$2 ;;
    *) usage ;;
  esac
  shift 2
done
export OPENBLAS_NUM_THREADS=1
out=$(mktemp -d /tmp/pskv-bench-eval-XXXXXX)
echo "bench-eval: logs in $out (load average $(cut -d' ' -f1-3 /proc/loadavg))"
common=(--app mlp --batch 16 --momentum 0.9 --validation-split 10000 --log-level warn)
fixed=(--lr 0.0075 --lr-schedule const)              # the cost runs
early=(--lr "$elr" --lr-schedule "$esched" --consistency "$econs") # the early pairs
quiet=(--scheduler-opt --log-level --scheduler-opt warn --server-opt --log-level --server-opt warn)

# job NAME EVALUATOR(0|1) [launch options...] -- [worker args...]: one run; prints its wall time
job() {
  local name=$1 ev=$2 t0; shift 2
  local lopts=()
  while [ "$1" != -- ]; do lopts+=("$1"); shift; done; shift
  t0=$(date +%s.%N)
  "$here/launch-local.sh" --servers 2 --workers 2 --evaluators "$ev" --timeout 1800 \
    --log-dir "$out/$name" "${quiet[@]}" "${lopts[@]}" -- "${common[@]}" "$@" > /dev/null 2>&1 ||
    { echo "bench-eval: $name failed (logs in $out/$name)" >&2; exit 1; }
  echo "$(date +%s.%N) - $t0" | bc
}

# shellcheck source=bench-lib.sh
. "$here/bench-lib.sh" # median

# best_val RUN: the highest val_accuracy of the run's evaluations, and when
best_val() {
  awk '/^evaluation [0-9]*:/ { for (i = 1; i < NF; i++) { if ($i == "epoch") e = $(i + 1)
         if ($i == "val_accuracy") v = $(i + 1) }
       if (v > m) { m = v; me = e } n++ }
       END { printf "%s at epoch %s (%d evaluations)", m, me, n }' "$out/$1/evaluator.log"
}

if [ -z "$only" ] || [ "$only" = early ]; then
  for p in $(seq "$pairs"); do
    e=$(job "early-$p" 1 --scheduler-opt --early-stop-metric=val_accuracy --scheduler-opt --patience="$patience" \
      --scheduler-opt --min-delta="$edelta" --evaluator-opt --eval-every="$eevery" -- "${early[@]}" \
      --epochs 30 --eval-every 0) || exit 1
    f=$(job "full-$p" 1 --evaluator-opt --eval-every="$eevery" -- "${early[@]}" --epochs 30 --eval-every 0) || exit 1
    echo "early pair $p: early stopping: $(printf %.1f "$e") s, $(grep -o 'after [0-9]* epochs' "$out/early-$p/worker-0.log"), best val_accuracy $(best_val "early-$p"); $(grep -o '^stopped early at epoch [0-9]*' "$out/early-$p/worker-0.log")"
    echo "early pair $p: full 30 epochs:  $(printf %.1f "$f") s, best val_accuracy $(best_val "full-$p"); final test accuracy $(grep -o 'final test accuracy [0-9.]*' "$out/full-$p/worker-0.log" | awk '{print $4}')"
    be=$(best_val "early-$p" | cut -d' ' -f1) bf=$(best_val "full-$p" | cut -d' ' -f1)
    gap=$(echo "$bf - $be" | bc -l) ratio=$(echo "$f / $e" | bc -l)
    echo "$gap $ratio" >> "$out/early"
    echo "early pair $p: gap $(printf %.4f "$gap") (full best - early best), time $(printf %.2f "$ratio")x less"
  done
  echo "early, $pairs pairs: median gap $(cut -d' ' -f1 "$out/early" | median | xargs printf %.4f)," \
    "median time ratio $(cut -d' ' -f2 "$out/early" | median | xargs printf %.2f)x"
fi

if [ -z "$only" ] || [ "$only" = cost ]; then
  : > "$out/cost"
  for r in $(seq "$runs"); do
    t=$(job "blocking-$r" 0 -- "${fixed[@]}" --epochs 5 --eval-every 1) || exit 1
    echo "blocking $t" >> "$out/cost"
    t=$(job "evaluator-$r" 1 --evaluator-opt --eval-every=1 -- "${fixed[@]}" --epochs 5 --eval-every 0) || exit 1
    echo "evaluator $t" >> "$out/cost"
    t=$(job "none-$r" 0 -- "${fixed[@]}" --epochs 5 --eval-every 0) || exit 1
    echo "none $t" >> "$out/cost"
  done
  for way in blocking evaluator none; do
    m=$(awk -v w=$way '$1 == w {print $2}' "$out/cost" | median)
    all=$(awk -v w=$way '$1 == w {printf "%.1f ", $2}' "$out/cost")
    echo "cost $way: median $(printf %.1f "$m") s (runs: $all)"
    for w in 0 1; do
      sed -n "s/^rank $w time split: /cost $way rank $w (last run): /p" "$out/$way-$runs/worker-$w.log"
    done
  done
  for r in $(seq "$runs"); do
    grep -h '^evaluator: [0-9]* evaluations' "$out/evaluator-$r/evaluator.log" | sed "s/^/cost evaluator run $r: /"
  done
fi
