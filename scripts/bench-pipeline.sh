#!/usr/bin/env bash
# Pipeline schedules: --app pipeline's throughput (rank 0's samples_per_s over one
# epoch, evaluation excluded) under each of --schedules, the same model and data
# in the same sitting, runs interleaved (one run of each schedule per round);
# prints per schedule the median of --runs runs, its ratio to the first
# schedule's, the median bubble fraction the first stage measured (beside the
# theory (S-1)/(M+S-1)), the peak saved activations per stage, and each stage's
# time split in the last run. A schedule named NAME-recompute runs NAME with
# --recompute. Also records the load average at the start and the end.
# Usage: scripts/bench-pipeline.sh [--runs N (3)] [--stages S (2)] [--micro-batches M (8)]
#        [--batch B (64)] [--train-limit N (6400)] [--layers L (784,1024,1024,1024,10)]
#        [--schedules "sequential gpipe 1f1b"] [--timeline DIR (last 1f1b run's
#        timeline of mini-batch 50 drawn into DIR/timeline-SCHEDULE.png)]
set -u
here=$(cd "$(dirname "$0")" && pwd)
runs=3 stages=2 micro=8 batch=64 limit=6400 layers=784,1024,1024,1024,10
scheds="sequential gpipe 1f1b" tdir=
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --stages) stages=$2; shift 2 ;;
    --micro-batches) micro=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --train-limit) limit=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    --schedules) scheds=$2; shift 2 ;;
    --timeline) tdir=$2; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--stages S] [--micro-batches M] [--batch B] [--train-limit N] [--layers L] [--schedules LIST] [--timeline DIR]" >&2
       exit 2 ;;
  esac
done
export OPENBLAS_NUM_THREADS=1
out=$(mktemp -d /tmp/pskv-bench-pl-XXXXXX)
trap 'rm -rf "$out"' EXIT
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for i in $(seq "$runs"); do
  for s in $scheds; do
    flags=(--schedule "${s%-recompute}")
    [ "$s" != "${s%-recompute}" ] && flags+=(--recompute)
    "$here/launch-local.sh" --servers 1 --workers "$stages" --timeout 600 --log-dir "$out/$s-$i" \
      --scheduler-opt --dead-after-ms --scheduler-opt 5000 -- --app pipeline --stages "$stages" \
      --layers "$layers" --micro-batches "$micro" --batch "$batch" "${flags[@]}" \
      --train-limit "$limit" --test-limit 1000 --epochs 1 --metrics "$out/$s-$i.jsonl" \
      --timeline-step 50 > "$out/$s-$i.out" 2>&1 || { echo "$s run $i failed: $(tail -n 2 "$out/$s-$i.out")" >&2; exit 1; }
    sed -n 's/.*"samples_per_s":\([0-9.]*\).*/\1/p' "$out/$s-$i.jsonl" | tail -n 1 >> "$out/$s.sps"
    sed -n 's/.*"bubble_fraction":\([0-9.]*\).*/\1/p' "$out/$s-$i.jsonl" | tail -n 1 >> "$out/$s.bub"
  done
done
. "$here/bench-lib.sh"
first=${scheds%% *}
base=$(median < "$out/$first.sps")
echo "pipeline layers=$layers stages=$stages micro-batches=$micro batch=$batch train-limit=$limit runs=$runs"
echo "load average at the start $load0, at the end $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v s="$stages" -v m="$micro" 'BEGIN { printf "bubble theory (S-1)/(M+S-1) = %.4f\n", (s-1)/(m+s-1) }'
for s in $scheds; do
  m=$(median < "$out/$s.sps")
  printf '%-18s samples_per_s=%s (runs: %s) x%.2f of %s; bubble fraction %s (runs: %s)\n' "$s" "$m" \
    "$(tr '\n' ' ' < "$out/$s.sps" | sed 's/ $//')" "$(awk -v a="$m" -v b="$base" 'BEGIN{print a/b}')" \
    "$first" "$(median < "$out/$s.bub")" "$(tr '\n' ' ' < "$out/$s.bub" | sed 's/ $//')"
  grep -h 'in flight' "$out/$s-$runs"/worker-*.log | sed 's/^/    /'
  if [ -n "$tdir" ]; then
    mkdir -p "$tdir"
    "$here/plot-timeline.sh" "$out/$s-$runs" -o "$tdir/timeline-$s.png" | sed 's/^/    /'
  fi
done
