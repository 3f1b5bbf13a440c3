#!/usr/bin/env bash
# Training benchmark: MLP 784-256-10 on Fashion-MNIST, SGD lr 0.01 momentum 0.9,
# 32 examples per worker per step, 5 epochs, 1 server + 2 workers, one BLAS thread
# per process, one push and one pull per step, async (the default model).
# Reports samples/s and test accuracy per epoch (median run of --runs), then, in
# the same sitting, PyTorch DDP (gloo, 2 ranks x 1 thread, global batch 64) from
# ../shared/reference when Debian's python3-torch is installed.
# Each consistency model of --models (default "async bsp") is measured in turn;
# "allreduce" there is --sync allreduce (the mean gradient by pskv_allreduce, the
# servers holding a copy) instead of a consistency model.
# --servers S (default 1) and --replicas R (default 1) set the cluster, for the cost
# of replication (bsp closes go down the chains).
# Usage: scripts/bench-train.sh [--runs N] [--epochs E] [--models "async bsp"] [--no-peer]
#                               [--servers S] [--replicas R]
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
runs=3 epochs=5 peer=1 models="async bsp" servers=1 replicas=1
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --no-peer) peer=0; shift ;;
    --models) models=$2; shift 2 ;;
    --servers) servers=$2; shift 2 ;;
    --replicas) replicas=$2; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--epochs E] [--models \"async bsp\"] [--no-peer] [--servers S] [--replicas R]" >&2; exit 2 ;;
  esac
done
export OPENBLAS_NUM_THREADS=1
out=$(mktemp -d /tmp/pskv-bench-train-XXXXXX)
trap 'rm -rf "$out"' EXIT
for model in $models; do
: > "$out/runs"
for r in $(seq "$runs"); do
  "$here/launch-local.sh" --servers "$servers" --workers 2 --timeout 900 --log-dir "$out/$model-$r" \
    --scheduler-opt --replicas --scheduler-opt "$replicas" \
    --scheduler-opt --log-level --scheduler-opt warn --server-opt --log-level --server-opt warn \
    -- --app mlp --epochs "$epochs" --batch 32 --lr 0.01 --lr-schedule const --momentum 0.9 \
       --log-level warn \
       $([ "$model" = allreduce ] && echo --sync allreduce || echo --consistency "$model") --metrics "$out/$model-$r/metrics.jsonl" > /dev/null 2>&1 ||
    { echo "bench-train: $model run $r failed" >&2; exit 1; }
  # whole-run rate: the job's samples over its training time (evaluation excluded):
  # each line covers about one epoch, so the rate is the harmonic mean of the lines'
  awk -v r="$r" -v e="$epochs" -v m="$model" 'BEGIN{FS="[:,}]"} {for(i=1;i<NF;i++){if($i~/"samples_per_s"/)inv+=1/$(i+1); if($i~/"accuracy"/)a=$(i+1)}; n++} END {printf "model=%s run=%d epochs=%d samples_per_s=%.0f accuracy=%.4f\n", m, r, e, n/inv, a}' \
    "$out/$model-$r/metrics.jsonl" | tee -a "$out/runs"
done
med=$(sort -t= -k5 -g "$out/runs" | awk -v n="$runs" 'NR==int((n+1)/2)')
echo "pskv mlp median: $med"
mr=$(sed 's/.*run=\([0-9]*\).*/\1/' <<< "$med")
echo "per epoch ($model run $mr):"
sed 's/^/  /' "$out/$model-$mr/metrics.jsonl"
grep -h 'step time\|waiting fraction' "$out/$model-$mr"/worker-*.log | sed 's/^/  /'
done
if [ $peer -eq 1 ]; then
  if /usr/bin/python3 -c 'import torch' 2>/dev/null && [ -f "$top/../shared/reference/tddp.py" ]; then
    ( cd "$out" && PYTHONPATH="$top/../shared/reference" /usr/bin/python3 "$top/../shared/reference/tddp.py" 0.01 "$epochs" 64 ) 2>&1 |
      grep -E '^epoch|^total' | sed 's/^/ddp: /'
  else
    echo "ddp: skipped (needs Debian's python3-torch and ../shared/reference/tddp.py)"
  fi
fi
