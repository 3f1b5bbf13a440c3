#!/usr/bin/env bash
# Pipeline schedules: --app pipeline's throughput (rank 0's samples_per_s over one
# epoch, evaluation excluded) under sequential, gpipe and 1f1b, the same model and
# data in the same sitting, runs interleaved; prints per schedule the median of
# --runs runs, its ratio to sequential's, and each stage's time split and peak
# in flight in the last run.
# Usage: scripts/bench-pipeline.sh [--runs N (3)] [--stages S (2)] [--micro-batches M (8)]
#        [--batch B (64)] [--train-limit N (6400)] [--layers L (784,1024,1024,1024,10)]
set -u
here=$(cd "$(dirname "$0")" && pwd)
runs=3 stages=2 micro=8 batch=64 limit=6400 layers=784,1024,1024,1024,10
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --stages) stages=$2; shift 2 ;;
    --micro-batches) micro=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --train-limit) limit=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--stages S] [--micro-batches M] [--batch B] [--train-limit N] [--layers L]" >&2
       exit 2 ;;
  esac
done
export OPENBLAS_NUM_THREADS=1
out=$(mktemp -d /tmp/pskv-bench-pl-XXXXXX)
trap 'rm -rf "$out"' EXIT
scheds="sequential gpipe 1f1b"
for i in $(seq "$runs"); do
  for s in $scheds; do
    "$here/launch-local.sh" --servers 1 --workers "$stages" --timeout 600 --log-dir "$out/$s-$i" \
      --scheduler-opt --dead-after-ms --scheduler-opt 5000 -- --app pipeline --stages "$stages" \
      --layers "$layers" --micro-batches "$micro" --batch "$batch" --schedule "$s" \
      --train-limit "$limit" --test-limit 1000 --epochs 1 --metrics "$out/$s-$i.jsonl" \
      > "$out/$s-$i.out" 2>&1 || { echo "$s run $i failed: $(tail -n 2 "$out/$s-$i.out")" >&2; exit 1; }
    sed -n 's/.*"samples_per_s":\([0-9.]*\).*/\1/p' "$out/$s-$i.jsonl" | tail -n 1 >> "$out/$s.sps"
  done
done
. "$here/bench-lib.sh"
base=$(median < "$out/sequential.sps")
echo "pipeline layers=$layers stages=$stages micro-batches=$micro batch=$batch train-limit=$limit runs=$runs"
for s in $scheds; do
  m=$(median < "$out/$s.sps")
  printf '%-10s samples_per_s=%s (runs: %s) x%.2f of sequential\n' "$s" "$m" \
    "$(tr '\n' ' ' < "$out/$s.sps" | sed 's/ $//')" "$(awk -v a="$m" -v b="$base" 'BEGIN{print a/b}')"
  grep -h 'peak' "$out/$s-$runs"/worker-*.log | sed 's/^/    /'
done
