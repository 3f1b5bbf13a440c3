#!/usr/bin/env bash
# `make demo`: trains the MLP (784-256-10) on Fashion-MNIST on a local cluster of
# 1 scheduler, 2 servers, 2 workers and an evaluator, with progress: a generous
# budget of 30 epochs that early stopping ends once the validation accuracy (the
# last 10,000 training images, held out) stops improving. Then prints when and why
# it stopped, the best validation accuracy, the best model's test accuracy, the
# test accuracy at the end, and where the metrics and the plot were written.
# The workers train under bsp at a batch of 512 (lr 0.2, x 0.9 per epoch) with
# --shm (values through shared memory with the servers): at a batch of 16 the job
# spent 5 CPU-seconds on communication for each one computing and its workers
# waited 0.9 of the time; at 512 it computes for most of it, to the same accuracy
# in less time (docs/benchmarks.md, "make demo": waiting fraction and floor). It
# prints the workers' waiting fractions and the job's waiting floor (bench-lib.sh).
# Usage: scripts/demo.sh [--out DIR] [-- EXTRA_WORKER_ARGS...]
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh" # cpu_sampler, floor_of
export PSKV_BIN_DIR=${PSKV_BIN_DIR:-$here/../build/bin}
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --out=*) out=${1#*=}; shift ;;
    --) shift; break ;;
    *) echo "usage: $0 [--out DIR] [-- WORKER_ARGS...]" >&2; exit 2 ;;
  esac
done
data=${PSKV_WORKER_DATA:-/usr/share/datasets/fashion-mnist}
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
  echo "demo: Fashion-MNIST not found: $data/train-images-idx3-ubyte.gz does not exist." >&2
  echo "demo: install it with 'apt-get install dataset-fashion-mnist' (make demo does this)." >&2
  exit 1
fi
[ -n "$out" ] || out=$(mktemp -d /tmp/pskv-demo-XXXXXX)
mkdir -p "$out"
metrics="$out/metrics.jsonl"
echo "== pskv demo: MLP 784-256-10 on Fashion-MNIST, 2 servers x 2 workers + 1 evaluator,"
echo "   up to 30 epochs (sgd, lr 0.2 x 0.9 per epoch, batch 512, bsp, --shm), 10,000 training"
echo "   images held out for validation; early stopping on val_accuracy (patience 5)"
start=$SECONDS
mkdir -p "$out/logs"
cpu_sampler "$out/logs" & sampler=$!
"$here/launch-local.sh" --servers 2 --workers 2 --evaluators 1 --timeout 900 --log-dir "$out/logs" \
  --scheduler-opt --log-level --scheduler-opt warn --server-opt --log-level --server-opt warn \
  --scheduler-opt --early-stop-metric=val_accuracy --scheduler-opt --patience=5 \
  --evaluator-opt --save-best="$out/best.model" --evaluator-opt --best-metric=val_accuracy \
  --evaluator-opt --metrics="$out/validation.jsonl" --evaluator-opt --eval-every=1 \
  -- --app mlp --epochs 30 --batch 512 --lr 0.2 --lr-schedule exp:0.9 --momentum 0.9 \
     --consistency bsp --shm \
     --validation-split 10000 --eval-every 0 --metrics "$metrics" \
     --save-model "$out/mlp.model" --log-level warn "$@"
rc=$?
wait "$sampler"
if [ $rc -ne 0 ]; then
  echo "demo: training failed (status $rc); logs in $out/logs" >&2
  exit $rc
fi
acc=$(grep -o 'final test accuracy [0-9.]*' "$out/logs/worker-0.log" | awk '{print $4}')
stopped=$(grep -m 1 '^stopped early' "$out/logs/worker-0.log")
best=$(grep -m 1 '^evaluator: [0-9]* evaluations' "$out/logs/evaluator.log")
best_test=$("$PSKV_BIN_DIR/pskv-evaluator" --app mlp --validation-split 10000 --log-level warn \
  --evaluate "$out/best.model" 2>&1 | grep -o 'test_accuracy [0-9.]*' | awk '{print $2}')
echo
echo "${stopped:-not stopped early: ran the whole budget of 30 epochs}"
echo "best validation: ${best#evaluator: }"
echo "best model's test accuracy: ${best_test:-?}  ($out/best.model)"
echo "test accuracy: $acc  (training took $((SECONDS - start)) s)"
waits=$(sed -n 's/^rank [0-9]* waiting fraction \([0-9.]*\) .*/\1/p' "$out"/logs/worker-*.log | paste -sd /)
echo "waiting fraction (rank 0 / 1): ${waits:-?}  (its floor, the job's CPU beside the workers' compute: $(floor_of "$out/logs"))"
echo "metrics: $metrics (validation: $out/validation.jsonl)"
if "$here/plot.sh" "$metrics" -o "$out/curves.png" > "$out/plot.log" 2>&1; then
  echo "plot:    $out/curves.png"
else
  echo "plot:    not drawn ($(tail -n 1 "$out/plot.log"))"
fi
echo "model:   $out/mlp.model"
echo "logs:    $out/logs"
