#!/usr/bin/env bash
# Feature admission on power-law data: what --admit-after N saves in server memory
# and costs in AUC. gen-sparse data (--examples, 10^8 possible ids, seed 11), then
# sparse-lr (2 servers x 2 workers, adagrad lr 0.05, batch 256, 1 epoch) with
# --admit-after 0 (off), 2 and 5, --runs times each: per run the test AUC, the rows
# the servers hold (both servers), their storage bytes (map, rows, state, and with
# admission the 4 MiB sketch per server) and resident memory; then the medians.
# Usage: scripts/bench-admit.sh [--examples N] [--runs R]
set -u
here=$(cd "$(dirname "$0")" && pwd)
examples=500000 runs=3
while [ $# -gt 0 ]; do
  case "$1" in
    --examples) examples=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) echo "usage: $0 [--examples N] [--runs R]" >&2; exit 2 ;;
  esac
done
out=$(mktemp -d /tmp/pskv-bench-admit-XXXXXX)
trap 'rm -rf "$out"' EXIT
"$here/gen-sparse" --examples "$examples" --features 100000000 --out "$out/data" --seed 11 \
  > "$out/gen.txt" || exit 1
cat "$out/gen.txt"
for n in 0 2 5; do
  for r in $(seq "$runs"); do
    logs="$out/logs-$n-$r"
    "$here/launch-local.sh" --servers 2 --workers 2 --timeout 900 --log-dir "$logs" \
      --scheduler-opt --log-level --scheduler-opt warn \
      -- --app sparse-lr --train "$out/data.train" --test "$out/data.test" --epochs 1 \
         --batch 256 --updater adagrad --lr 0.05 --eval-every 0 --admit-after "$n" \
      > /dev/null 2>&1 ||
      { echo "bench-admit: training failed" >&2; tail -n 5 "$logs"/*.log >&2; exit 1; }
    auc=$(sed -n 's/.*final auc \([0-9.]*\).*/\1/p' "$logs/worker-0.log")
    rows=$(sed -n "s/.*table 'sparse-lr.w': \([0-9]*\) rows, \([0-9]*\) bytes.*/\1/p" \
      "$logs"/server-*.log | awk '{ s += $1 } END { print s }')
    bytes=$(sed -n "s/.*table 'sparse-lr.w': \([0-9]*\) rows, \([0-9]*\) bytes.*/\2/p" \
      "$logs"/server-*.log | awk '{ s += $1 } END { print s }')
    rss=$(sed -n 's/.*resident memory \([0-9.]*\) MiB.*/\1/p' "$logs"/server-*.log |
      awk '{ s += $1 } END { print s }')
    dropped=$(sed -n 's/.* \([0-9]*\) pushes dropped before admission.*/\1/p' "$logs"/server-*.log |
      awk '{ s += $1 } END { print s + 0 }')
    echo "admit_after=$n run=$r auc=$auc rows=$rows bytes=$bytes rss_mib=$rss dropped=$dropped"
  done
done | tee "$out/runs.txt"
echo "medians:"
for n in 0 2 5; do
  med() { grep "^admit_after=$n " "$out/runs.txt" | sed -n "s/.* $1=\([0-9.]*\).*/\1/p" | sort -g |
    awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
  echo "admit_after=$n auc=$(med auc) rows=$(med rows) bytes=$(med bytes) rss_mib=$(med rss_mib) dropped=$(med dropped)"
done
