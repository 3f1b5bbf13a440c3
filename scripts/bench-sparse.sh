#!/usr/bin/env bash
# Sparse logistic regression at scale: synthetic LIBSVM data with power-law feature
# frequencies over 10^9 ids (at least 10 million distinct ones by default), 2
# servers x 2 workers, adagrad: examples/s, pushed keys/s, server memory per key,
# and the final AUC against the planted model's.
# Usage: scripts/bench-sparse.sh [--examples N] [--epochs E]
set -u
here=$(cd "$(dirname "$0")" && pwd)
examples=6000000 epochs=1
while [ $# -gt 0 ]; do
  case "$1" in
    --examples) examples=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    *) echo "usage: $0 [--examples N] [--epochs E]" >&2; exit 2 ;;
  esac
done
out=$(mktemp -d /tmp/pskv-bench-sparse-XXXXXX)
trap 'rm -rf "$out"' EXIT
"$here/gen-sparse" --examples "$examples" --features 1000000000 --out "$out/data" --seed 11 > "$out/gen.txt" || exit 1
cat "$out/gen.txt"
planted=$(sed -n 's/^planted_auc=//p' "$out/gen.txt")
start=$(date +%s.%N)
"$here/launch-local.sh" --servers 2 --workers 2 --timeout 1800 --log-dir "$out/logs" \
  --scheduler-opt --log-level --scheduler-opt warn \
  -- --app sparse-lr --train "$out/data.train" --test "$out/data.test" --epochs "$epochs" \
     --batch 256 --updater adagrad --lr 0.05 --eval-every 0 --log-level warn > /dev/null 2>&1 ||
  { echo "bench-sparse: training failed" >&2; tail -n 5 "$out"/logs/*.log >&2; exit 1; }
end=$(date +%s.%N)
grep -h 'final auc\|done:' "$out"/logs/worker-*.log
grep -h 'resident memory' "$out"/logs/server-*.log | sed 's/.*INFO /server: /'
train_n=$(sed -n 's/.*train_examples=\([0-9]*\).*/\1/p' "$out/gen.txt")
awk -v s="$start" -v e="$end" -v n="$train_n" -v ep="$epochs" -v p="$planted" \
  'BEGIN { printf "examples_per_s=%.0f (launch to exit, %d examples x %d epochs) planted_auc=%s\n", n*ep/(e-s), n, ep, p }'
