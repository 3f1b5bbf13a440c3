#!/usr/bin/env bash
# `make demo`: trains the MLP (784-256-10) on Fashion-MNIST on a local cluster of
# 1 scheduler, 2 servers and 2 workers, with progress, then prints the test
# accuracy and where the metrics and the plot were written.
# Usage: scripts/demo.sh [--out DIR] [-- EXTRA_WORKER_ARGS...]
set -u
here=$(cd "$(dirname "$0")" && pwd)
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
echo "== pskv demo: MLP 784-256-10 on Fashion-MNIST, 2 servers x 2 workers, 5 epochs (sgd, lr 0.0075 decaying linearly, batch 16)"
start=$SECONDS
"$here/launch-local.sh" --servers 2 --workers 2 --timeout 900 --log-dir "$out/logs" \
  --scheduler-opt --log-level --scheduler-opt warn --server-opt --log-level --server-opt warn \
  -- --app mlp --epochs 5 --batch 16 --lr 0.0075 --lr-schedule linear --momentum 0.9 \
     --metrics "$metrics" \
     --save-model "$out/mlp.model" --log-level warn "$@"
rc=$?
if [ $rc -ne 0 ]; then
  echo "demo: training failed (status $rc); logs in $out/logs" >&2
  exit $rc
fi
acc=$(grep -o 'final test accuracy [0-9.]*' "$out/logs/worker-0.log" | awk '{print $4}')
echo
echo "test accuracy: $acc  (training took $((SECONDS - start)) s)"
echo "metrics: $metrics"
if "$here/plot.sh" "$metrics" -o "$out/curves.png" > "$out/plot.log" 2>&1; then
  echo "plot:    $out/curves.png"
else
  echo "plot:    not drawn ($(tail -n 1 "$out/plot.log"))"
fi
echo "model:   $out/mlp.model"
echo "logs:    $out/logs"
