#!/usr/bin/env bash
# Pipeline schedules: --app pipeline's throughput (rank 0's samples_per_s over one
# epoch, evaluation excluded) under each of --schedules, the same model and data
# in the same sitting, runs interleaved (one run of each schedule per round);
# prints per schedule the median of --runs runs, its ratio to the first
# schedule's, the median bubble fraction the first stage measured (beside the
# theory (S-1)/(M+S-1)), the peak saved activations per stage, and each stage's
# time split in the last run. A schedule named NAME-recompute runs NAME with
# --recompute. Also records the load average at the start and the end, and a
# floor model from the stages' per-micro-batch CPU times (--suggest-split's
# probe, c_k for stage k of the cut used): sequential takes M * sum(c) per
# mini-batch, a pipelined schedule at best (M-1) * max(c) + sum(c) (the first
# micro-batch through every stage, then one per slowest-stage interval), so on S
# idle cores the best ratio is their quotient, before the servers' and the
# sends' time.
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
      -- --app pipeline --stages "$stages" \
      --layers "$layers" --micro-batches "$micro" --batch "$batch" "${flags[@]}" \
      --train-limit "$limit" --test-limit 1000 --epochs 1 --metrics "$out/$s-$i.jsonl" \
      --timeline-step 50 > "$out/$s-$i.out" 2>&1 || { echo "$s run $i failed: $(tail -n 2 "$out/$s-$i.out")" >&2; exit 1; }
    sed -n 's/.*"samples_per_s":\([0-9.]*\).*/\1/p' "$out/$s-$i.jsonl" | tail -n 1 >> "$out/$s.sps"
    sed -n 's/.*"bubble_fraction":\([0-9.]*\).*/\1/p' "$out/$s-$i.jsonl" | tail -n 1 >> "$out/$s.bub"
  done
done
"$here/launch-local.sh" --servers 1 --workers "$stages" --timeout 120 --log-dir "$out/probe" -- \
  --app pipeline --stages "$stages" --layers "$layers" --micro-batches "$micro" --batch "$batch" \
  --suggest-split > "$out/probe.out" 2>&1 || { echo "the probe failed: $(tail -n 2 "$out/probe.out")" >&2; exit 1; }
. "$here/bench-lib.sh"
first=${scheds%% *}
base=$(median < "$out/$first.sps")
echo "pipeline layers=$layers stages=$stages micro-batches=$micro batch=$batch train-limit=$limit runs=$runs"
echo "load average at the start $load0, at the end $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v s="$stages" -v m="$micro" 'BEGIN { printf "bubble theory (S-1)/(M+S-1) = %.4f\n", (s-1)/(m+s-1) }'
sed -n 's/^pipeline: per stage under the cut balancing parameters: \([0-9. ]*\) ms.*/\1/p' \
  "$out/probe/worker-0.log" | awk -v m="$micro" '{ sum = 0; max = 0
    for (i = 1; i <= NF; i++) { sum += $i; if ($i > max) max = $i }
    printf "floor model: stages %s ms of CPU per micro-batch; sequential %.1f ms, pipelined >= %.1f ms a mini-batch: at most x%.2f (x%.2f without the bubble)\n",
      $0, m * sum, (m - 1) * max + sum, m * sum / ((m - 1) * max + sum), sum / max }'
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
