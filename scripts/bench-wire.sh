#!/usr/bin/env bash
# Wire precision of parameter-server tables (docs/protocol.md, "Wire precision"):
# MLP 784-256-10 on Fashion-MNIST, 1 server + 2 workers, async, batch 32, sgd lr 0.01
# momentum 0.9, --epochs E (default 2), one BLAS thread per process. Each run of
# --runs N (default 3) runs every wire of --wires (default "fp32 fp16") in turn, so
# that the wires alternate on a loaded machine; per wire it prints each run's
# samples/s, final accuracy and bytes per step (rank 0's data bytes on the wire,
# sent and received, both tables, per step: the metrics' bytes_per_step), then the
# medians (of the runs that ended well: a failed run, say a server declared dead on
# an overloaded machine, is printed and left out). A wire "fp16:dynamic" adds
# --loss-scale dynamic.
# Usage: scripts/bench-wire.sh [--runs N] [--epochs E] [--wires "fp32 fp16 bf16"]
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"
runs=3 epochs=2 wires="fp32 fp16"
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --wires) wires=$2; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--epochs E] [--wires \"fp32 fp16\"]" >&2; exit 2 ;;
  esac
done
export OPENBLAS_NUM_THREADS=1
out=$(mktemp -d /tmp/pskv-bench-wire-XXXXXX)
trap 'rm -rf "$out"' EXIT
for r in $(seq "$runs"); do
  for w in $wires; do
    d="$out/${w/:/-}-$r" extra=()
    [ "${w#*:}" = dynamic ] && extra=(--loss-scale dynamic)
    "$here/launch-local.sh" --servers 1 --workers 2 --timeout 900 --log-dir "$d" \
      -- --app mlp --epochs "$epochs" --batch 32 --lr 0.01 --lr-schedule const --momentum 0.9 \
      --seed 1 --eval-every 0 --wire "${w%%:*}" "${extra[@]}" --metrics "$d/metrics.jsonl" > /dev/null 2>&1 ||
      { echo "wire=$w run=$r failed: $(grep -h 'failed' "$d"/worker-*.log | tail -n 1)"; continue; }
    tail -n 1 "$d/metrics.jsonl" | awk -v w="$w" -v r="$r" 'BEGIN{FS="[:,}]"}
      {for(i=1;i<NF;i++){if($i~/"samples_per_s"/)s=$(i+1); if($i~/"accuracy"/)a=$(i+1); if($i~/"bytes_per_step"/)b=$(i+1)}}
      END {printf "wire=%s run=%d samples_per_s=%.0f accuracy=%.4f bytes_per_step=%.0f\n", w, r, s, a, b}' |
      tee -a "$out/runs"
  done
done
for w in $wires; do
  printf 'median wire=%s samples_per_s=%s accuracy=%s bytes_per_step=%s\n' "$w" \
    "$(grep "^wire=$w " "$out/runs" | sed 's/.*samples_per_s=\([0-9.]*\).*/\1/' | median)" \
    "$(grep "^wire=$w " "$out/runs" | sed 's/.*accuracy=0\.\([0-9]*\).*/\1/' | median | awk '{printf "%.4f", $1 / 10000}')" \
    "$(grep "^wire=$w " "$out/runs" | sed 's/.*bytes_per_step=\([0-9.]*\).*/\1/' | median)"
done
