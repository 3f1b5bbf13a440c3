#!/usr/bin/env bash
# tune-demo.sh: a short pskv-tune study of the Fashion-MNIST MLP (make tune-demo).
#   scripts/tune-demo.sh [--dir DIR] [--trials N] [--train-limit N] [--bin-dir DIR]
# A GP search over --lr, --momentum and --batch with ASHA (eta 3, rungs at epochs 1
# and 3, 9 epochs at most), two trials at a time, each a local job (1 server, 1
# worker). Prints the best configuration, its accuracy and where the plot is. The
# metric is the `accuracy` the mlp app prints at the end of each epoch (test
# accuracy: pskv-worker prints no per-epoch validation line yet), so the figure is a
# demo of the tuner, not a model selection. Exit status: pskv-tune's.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=$top/build/tune-demo trials=12 limit=0 bin=${PSKV_BIN_DIR:-$top/build/bin}
while [ $# -gt 0 ]; do
  case $1 in
    --dir) dir=$2; shift 2 ;;
    --trials) trials=$2; shift 2 ;;
    --train-limit) limit=$2; shift 2 ;;
    --bin-dir) bin=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "tune-demo.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$dir"
rm -rf "$dir/study.db" "$dir/study.db-wal" "$dir/study.db-shm" "$dir/study.db.d"
cat > "$dir/space.txt" <<'EOS'
--lr log 0.002 0.05
--momentum uniform 0.5 0.95
--batch choice 16 32 64
EOS
"$bin/pskv-tune" create "$dir/study.db" --space "$dir/space.txt" --algo gp \
  --sched asha:eta=3,min=1,max=9 --metric accuracy:max --max-trials "$trials" --parallel 2 \
  --seed 1 -- --app mlp --train-limit "$limit"
start=$(date +%s)
"$bin/pskv-tune" run "$dir/study.db" --bin-dir "$bin" --log-level warn
"$bin/pskv-tune" status "$dir/study.db"
echo "took $(( $(date +%s) - start )) s"
if command -v gnuplot > /dev/null; then
  "$bin/pskv-tune" plot "$dir/study.db" --out "$dir/study.png"
else
  echo "no gnuplot: no plot (scripts/install-deps.sh gnuplot-nox)"
fi
