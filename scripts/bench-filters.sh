#!/usr/bin/env bash
# Bytes per step and accuracy of each wire filter (docs/protocol.md, "Filters"):
#   MLP 784-256-10 on Fashion-MNIST, 2 servers, 2 workers, async, --epochs E (default 2):
#     per filter the median over --runs N (default 3) of samples/s, final accuracy,
#     bytes per worker step (sent + received after the filters, both workers' mean),
#     the same before the filters, and ms in filters per MB before them;
#   sparse LR on pskv-gen-sparse data (50,000 examples, 10,000 features), 3 epochs:
#     bytes per example (both workers, after and before the filters) and AUC per filter.
# "none" for the MLP runs --filter keycache, which does nothing to dense runs (no key
# list is sent) but makes the workers report their bytes.
# Usage: scripts/bench-filters.sh [--runs N] [--epochs E] [--mlp "none lz4 ..."] [--sparse "..."]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${PSKV_BIN_DIR:-$here/../build/bin}
runs=3 epochs=2
mlp_filters="none lz4 zstd int8 int8,lz4 sign significant:0.001"
sparse_filters="keycache lz4 keycache,lz4 keycache,zstd"
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --mlp) mlp_filters=$2; shift 2 ;;
    --sparse) sparse_filters=$2; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--epochs E] [--mlp LIST] [--sparse LIST]" >&2; exit 2 ;;
  esac
done
export OPENBLAS_NUM_THREADS=1
out=$(mktemp -d /tmp/pskv-bench-filters-XXXXXX)
trap 'rm -rf "$out"' EXIT
# sums the workers' "filters" lines: sent, before, received, before, ms
traffic() {
  sed -n 's/.* sent \([0-9]*\) bytes (\([0-9]*\) before filters), received \([0-9]*\) (\([0-9]*\) before).* \([0-9.]*\) ms in filters/\1 \2 \3 \4 \5/p' "$@" |
    awk '{s += $1; sb += $2; r += $3; rb += $4; ms += $5} END {print s, sb, r, rb, ms}'
}
steps=$((epochs * 60000 / (2 * 32)))
printf '%-20s %12s %9s %16s %16s %12s\n' filter samples/s accuracy bytes/step before/step "ms per MB"
for f in $mlp_filters; do
  : > "$out/runs"
  for r in $(seq "$runs"); do
    d="$out/mlp-$r"
    rm -rf "$d"
    # none: keycache, which does nothing on the dense runs of this model's tables,
    # so that the worker reports its bytes
    flag=$f; [ "$f" = none ] && flag=keycache
    "$here/launch-local.sh" --servers 2 --workers 2 --timeout 900 --log-dir "$d" \
      -- --app mlp --epochs "$epochs" --batch 32 --lr 0.01 --lr-schedule const --momentum 0.9 \
      --seed 1 --filter "$flag" --metrics "$d/metrics.jsonl" > /dev/null 2>&1 ||
      { echo "bench-filters: mlp --filter $f run $r failed:" >&2; tail -n 3 "$d"/*.log >&2; exit 1; }
    read -r s sb rc rb ms <<< "$(traffic "$d"/worker-*.log)"
    awk -v r="$r" -v st="$steps" -v s="${s:-0}" -v sb="${sb:-0}" -v rc="${rc:-0}" -v rb="${rb:-0}" -v ms="${ms:-0}" \
      'BEGIN{FS="[:,}]"} {for(i=1;i<NF;i++){if($i~/"samples_per_s"/)inv+=1/$(i+1); if($i~/"accuracy"/)a=$(i+1)}; n++}
       END {printf "run=%d sps=%.0f acc=%.4f bps=%.0f before=%.0f msmb=%.2f\n", r, n/inv, a,
            (s+rc)/2/st, (sb+rb)/2/st, (sb+rb) ? ms/((sb+rb)/1e6) : 0}' "$d/metrics.jsonl" >> "$out/runs"
  done
  med=$(sort -t= -k3 -g "$out/runs" | awk -v n="$runs" 'NR==int((n+1)/2)')
  eval "$(sed 's/run=[0-9]* //; s/ /;/g' <<< "$med")"
  printf '%-20s %12s %9s %16s %16s %12s\n' "$f" "$sps" "$acc" "$bps" "$before" "$msmb"
done
"$bin/pskv-gen-sparse" --examples 50000 --features 10000 --out "$out/gen" --seed 7 > "$out/gen.out"
printf '\n%-20s %14s %14s %8s\n' filter bytes/example before auc
for f in $sparse_filters; do
  d="$out/slr"
  rm -rf "$d"
  flag=$f
  "$here/launch-local.sh" --servers 2 --workers 2 --timeout 900 --log-dir "$d" -- --app sparse-lr \
    --train "$out/gen.train" --test "$out/gen.test" --epochs 3 --batch 64 --updater adagrad \
    --lr 0.05 --eval-every 0 --seed 1 --filter "$flag" > /dev/null 2>&1 ||
    { echo "bench-filters: sparse-lr --filter $f failed" >&2; exit 1; }
  read -r s sb rc rb ms <<< "$(traffic "$d"/worker-*.log)"
  auc=$(grep -o 'final auc [0-9.]*' "$d/worker-0.log" | awk '{print $3}')
  printf '%-20s %14s %14s %8s\n' "$f" "$(awk -v s="${s:-0}" -v r="${rc:-0}" 'BEGIN{printf "%.1f", (s+r)/(45000*3)}')" \
    "$(awk -v s="${sb:-0}" -v r="${rb:-0}" 'BEGIN{printf "%.1f", (s+r)/(45000*3)}')" "$auc"
done
