#!/usr/bin/env bash
# Sparse logistic regression: pskv's sparse-lr with each updater of --updaters
# against liblinear (Debian's liblinear-tools) on the same generated data, as
# test AUC and wall time, loading included. gen-sparse data (power-law feature
# frequencies, a planted logistic model), then, --runs times in turn:
#   - sparse-lr, 2 servers x 2 workers, batch 256, --epochs E, for each updater
#     spec (launch to exit: reading, training and the test evaluation);
#   - liblinear-train for each solver of --solvers and C of --costs (reading the
#     file and training; liblinear-predict -b 1 after, not timed), AUC from its
#     probabilities. Feature ids above 50 M are remapped first to 1..D in order
#     of appearance (liblinear keeps a dense weight vector), said on the output.
# Prints one line per run and setting, `pskv upd=… run= auc= wall_s= rows=
# server_rss_mib= examples_per_s= bytes_per_example= raw_bytes_per_example=` (rows
# and resident memory summed over the two servers at exit; examples/s launch to
# exit, epochs included; bytes: the weight table's data frames, keys and values,
# sent and received by both workers, after and before the wire filters, per
# training example of all epochs, rank 0's final evaluation pull included) and
# `liblinear s= c= run= auc= wall_s=`, then the medians and the best liblinear.
# Usage: scripts/bench-sparse.sh [--examples N] [--features F] [--seed S]
#   [--epochs E] [--runs R] [--updaters "SPEC;SPEC"] [--solvers "0 6"]
#   [--costs "0.03 0.1 0.3 1"] [--no-liblinear]
# SPEC: a name for the line, a colon, then the worker flags, e.g.
#   "adagrad:--updater adagrad --lr 0.05;ftrl:--updater ftrl"
# or, for the wire filters at one updater (docs/benchmarks.md),
#   "none:--updater sgd --momentum 0 --lr 0.5 --l1 0.004;kkt:--updater sgd
#    --momentum 0 --lr 0.5 --l1 0.004 --filter kkt"
set -u
here=$(cd "$(dirname "$0")" && pwd)
examples=1000000 features=10000000 seed=23 epochs=3 runs=3 liblinear=1
updaters="adagrad:--updater adagrad --lr 0.05;ftrl:--updater ftrl;ftrl-l1-1e-4:--updater ftrl --l1 0.0001"
solvers="0 6" costs="0.03 0.1 0.3 1"
while [ $# -gt 0 ]; do
  case "$1" in
    --examples) examples=$2; shift 2 ;;
    --features) features=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --updaters) updaters=$2; shift 2 ;;
    --solvers) solvers=$2; shift 2 ;;
    --costs) costs=$2; shift 2 ;;
    --no-liblinear) liblinear=0; shift ;;
    *) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
if ((liblinear)) && ! command -v liblinear-train > /dev/null; then
  echo "bench-sparse: liblinear-train not found (Debian's liblinear-tools; scripts/install-deps.sh): liblinear skipped" >&2
  liblinear=0
fi
out=$(mktemp -d /tmp/pskv-bench-sparse-XXXXXX)
trap 'rm -rf "$out"' EXIT
"$here/gen-sparse" --examples "$examples" --features "$features" --out "$out/data" --seed "$seed" \
  > "$out/gen.txt" || exit 1
cat "$out/gen.txt"
planted=$(sed -n 's/^planted_auc=//p' "$out/gen.txt")
train_n=$(sed -n 's/.*train_examples=\([0-9]*\).*/\1/p' "$out/gen.txt")

# auc LABELS SCORES: the area under the ROC curve (ties count a half)
auc() {
  paste -d' ' "$1" "$2" | sort -g -k2 | awk '
    { lab[NR] = $1; sc[NR] = $2 }
    END { i = 1; rs = 0; np = 0
      while (i <= NR) { j = i; while (j < NR && sc[j + 1] == sc[i]) j++
        for (k = i; k <= j; k++) if (lab[k] > 0) { rs += (i + j) / 2; np++ }
        i = j + 1 }
      printf "%.4f\n", (rs - np * (np + 1) / 2) / (np * (NR - np)) }'
}

ll_train=$out/data.train ll_test=$out/data.test
if ((liblinear)); then
  cut -d' ' -f1 "$out/data.test" > "$out/labels"
  maxid=$(awk '{ for (i = 2; i <= NF; i++) { split($i, a, ":"); if (a[1] + 0 > m) m = a[1] + 0 } }
    END { print m + 0 }' "$out/data.train" "$out/data.test")
  if [ "$maxid" -gt 50000000 ]; then
    echo "liblinear: ids up to $maxid remapped to 1..D in order of appearance"
    awk -v tr="$out/ll.train" -v te="$out/ll.test" '
      { f = (FILENAME ~ /train$/) ? tr : te; line = $1
        for (i = 2; i <= NF; i++) { split($i, a, ":"); if (!(a[1] in id)) id[a[1]] = ++d
          v[i] = id[a[1]] ":" a[2]; k[i] = id[a[1]] }
        # liblinear wants ascending ids in a line
        n = NF; for (i = 3; i <= n; i++) { x = k[i]; y = v[i]; j = i - 1
          while (j >= 2 && k[j] > x) { k[j + 1] = k[j]; v[j + 1] = v[j]; j-- } k[j + 1] = x; v[j + 1] = y }
        for (i = 2; i <= n; i++) line = line " " v[i]; print line > f }' \
      "$out/data.train" "$out/data.test"
    ll_train=$out/ll.train ll_test=$out/ll.test
  fi
fi

IFS=';' read -r -a specs <<< "$updaters"
for r in $(seq "$runs"); do
  for spec in "${specs[@]}"; do
    name=${spec%%:*} flags=${spec#*:}
    logs="$out/logs-$name-$r"
    start=$(date +%s.%N)
    # shellcheck disable=SC2086 # the spec's flags split on spaces
    "$here/launch-local.sh" --servers 2 --workers 2 --timeout 3600 --log-dir "$logs" \
      --scheduler-opt --log-level --scheduler-opt warn \
      -- --app sparse-lr --train "$out/data.train" --test "$out/data.test" --epochs "$epochs" \
         --batch 256 --eval-every 0 --log-level warn $flags > /dev/null 2>&1 ||
      { echo "bench-sparse: training failed ($name)" >&2; tail -n 5 "$logs"/*.log >&2; exit 1; }
    end=$(date +%s.%N)
    a=$(sed -n 's/.*final auc \([0-9.]*\).*/\1/p' "$logs/worker-0.log")
    rows=$(sed -n "s/.*table 'sparse-lr.w': \([0-9]*\) rows.*/\1/p" "$logs"/server-*.log |
      awk '{ s += $1 } END { print s + 0 }')
    rss=$(sed -n 's/.*resident memory \([0-9.]*\) MiB.*/\1/p' "$logs"/server-*.log |
      awk '{ s += $1 } END { print s + 0 }')
    # bytes per example: both workers' weight traffic, after and before the filters
    bpe=$(sed -n 's/.* weight traffic: sent \([0-9]*\) bytes (\([0-9]*\) before filters), received \([0-9]*\) (\([0-9]*\) before).*/\1 \2 \3 \4/p' \
      "$logs"/worker-*.log | awk -v n="$train_n" -v ep="$epochs" \
      '{ s += $1 + $3; b += $2 + $4 } END { printf "bytes_per_example=%.1f raw_bytes_per_example=%.1f", s / (n * ep), b / (n * ep) }')
    echo "pskv upd=$name run=$r auc=$a wall_s=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", e - s }') rows=$rows" \
      "server_rss_mib=$rss examples_per_s=$(awk -v s="$start" -v e="$end" -v n="$train_n" -v ep="$epochs" \
        'BEGIN { printf "%.0f", n * ep / (e - s) }') $bpe load=$(cut -d' ' -f1 /proc/loadavg) flags=\"$flags\""
  done
  ((liblinear)) || continue
  for s in $solvers; do
    for c in $costs; do
      m="$out/m-$s-$c"
      start=$(date +%s.%N)
      liblinear-train -s "$s" -c "$c" "$ll_train" "$m" > /dev/null || { echo "bench-sparse: liblinear-train failed" >&2; exit 1; }
      end=$(date +%s.%N)
      liblinear-predict -b 1 "$ll_test" "$m" "$m.out" > /dev/null
      awk 'NR == 1 { for (i = 2; i <= NF; i++) if ($i == "1") c = i; next } { print $c }' "$m.out" > "$m.p"
      echo "liblinear s=$s c=$c run=$r auc=$(auc "$out/labels" "$m.p") wall_s=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", e - s }')" \
        "load=$(cut -d' ' -f1 /proc/loadavg)"
      rm -f "$m" "$m.out" "$m.p"
    done
  done
done | tee "$out/runs.txt"

# med PATTERN FIELD: the median of FIELD over the lines starting with PATTERN
med() { grep "^$1 " "$out/runs.txt" | sed -n "s/.* $2=\([0-9.]*\).*/\1/p" | sort -g |
  awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "medians over $runs runs (planted_auc=$planted):"
for spec in "${specs[@]}"; do
  name=${spec%%:*}
  echo "pskv upd=$name auc=$(med "pskv upd=$name" auc) wall_s=$(med "pskv upd=$name" wall_s)" \
    "rows=$(med "pskv upd=$name" rows) server_rss_mib=$(med "pskv upd=$name" server_rss_mib)" \
    "examples_per_s=$(med "pskv upd=$name" examples_per_s)" \
    "bytes_per_example=$(med "pskv upd=$name" bytes_per_example)" \
    "raw_bytes_per_example=$(med "pskv upd=$name" raw_bytes_per_example)"
done
if ((liblinear)); then
  for s in $solvers; do
    for c in $costs; do
      echo "liblinear s=$s c=$c auc=$(med "liblinear s=$s c=$c" auc) wall_s=$(med "liblinear s=$s c=$c" wall_s)"
    done
  done | tee "$out/ll-med.txt"
  sort -t= -k4 -g "$out/ll-med.txt" | tail -n 1 | sed 's/^liblinear/liblinear best:/'
fi
