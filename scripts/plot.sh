#!/usr/bin/env bash
# plot.sh - training curves from pskv metrics files (JSON Lines).
#
# Usage:
#   scripts/plot.sh METRICS.jsonl... -o curves.png
#
# Draws one PNG with 2x2 panels: test accuracy and test loss, each against time
# (seconds) and against epoch, one line per input file titled by its file name.
# Every input line that is a JSON object with numeric "epoch", "time", "test_loss"
# and "accuracy" fields (in any order, among any others) is a point; other lines
# are skipped. Parsing is plain awk: no python or jq needed. Needs gnuplot
# (Debian/Ubuntu: apt-get install gnuplot-nox), for this script only.
#
# Exit status: 0 written, 1 gnuplot missing or failing or no usable data,
# 2 bad arguments.
set -u

prog=plot.sh
usage() {
  cat >&2 <<'EOF'
usage: scripts/plot.sh METRICS.jsonl... -o curves.png
  Plots test accuracy and test loss against time and epoch (2x2 panels), one line
  per input file. Input: JSON Lines with "epoch", "time", "test_loss", "accuracy".
EOF
  exit 2
}

out=
inputs=()
while [ $# -gt 0 ]; do
  case "$1" in
    -o|--output)
      [ $# -ge 2 ] && [ -n "$2" ] || { echo "$prog: $1 needs a file name" >&2; usage; }
      out=$2; shift 2 ;;
    --output=*) out=${1#--output=}; shift ;;
    -h|--help) usage ;;
    --) shift; inputs+=("$@"); break ;;
    -?*) echo "$prog: unknown option $1" >&2; usage ;;
    *) inputs+=("$1"); shift ;;
  esac
done
[ -n "$out" ] || { echo "$prog: -o OUTPUT.png is required" >&2; usage; }
[ ${#inputs[@]} -gt 0 ] || { echo "$prog: no metrics files given" >&2; usage; }
for f in "${inputs[@]}"; do
  [ -f "$f" ] && [ -r "$f" ] || { echo "$prog: cannot read $f" >&2; usage; }
done

if ! command -v gnuplot >/dev/null 2>&1; then
  echo "$prog: gnuplot not found; install it (Debian/Ubuntu: sudo apt-get install gnuplot-nox)" >&2
  exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pskv-plot-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# One data file per input: "epoch time test_loss accuracy" per usable record.
extract() {
  awk '
    function field(line, name,    rest, num) {
      if (!match(line, "\"" name "\"[ \t]*:[ \t]*"))
        return ""
      rest = substr(line, RSTART + RLENGTH)
      if (!match(rest, /^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?/))
        return ""
      num = substr(rest, 1, RLENGTH)
      return num
    }
    /^[ \t]*\{/ {
      e = field($0, "epoch"); t = field($0, "time")
      l = field($0, "test_loss"); a = field($0, "accuracy")
      if (e != "" && t != "" && l != "" && a != "") { print e, t, l, a; n++ }
    }
    END { exit n > 0 ? 0 : 1 }
  ' "$1"
}

. "$(dirname "$0")/plot-lib.sh"

plots_time_acc=() plots_epoch_acc=() plots_time_loss=() plots_epoch_loss=()
i=0
for f in "${inputs[@]}"; do
  i=$((i + 1))
  d="$tmp/run$i.dat"
  if ! extract "$f" >"$d"; then
    echo "$prog: $f has no records with numeric epoch, time, test_loss and accuracy; skipped" >&2
    continue
  fi
  title=$(gq "$(basename "$f")")
  src=$(gq "$d")
  style="with linespoints ls $(( (i - 1) % 8 + 1 )) title $title noenhanced"
  plots_time_acc+=("$src using 2:4 $style")
  plots_epoch_acc+=("$src using 1:4 $style")
  plots_time_loss+=("$src using 2:3 $style")
  plots_epoch_loss+=("$src using 1:3 $style")
done
if [ ${#plots_time_acc[@]} -eq 0 ]; then
  echo "$prog: nothing to plot" >&2
  exit 1
fi
join() { local IFS=','; echo "$*"; }

term=$(plot_term 1400 1000)

cat >"$tmp/plot.gp" <<EOF
set terminal $term
set output $(gq "$out")
set grid
set key bottom right
set style line 1 lc rgb '#1f77b4' lw 2 pt 7 ps 0.5
set style line 2 lc rgb '#d62728' lw 2 pt 5 ps 0.5
set style line 3 lc rgb '#2ca02c' lw 2 pt 9 ps 0.5
set style line 4 lc rgb '#ff7f0e' lw 2 pt 11 ps 0.5
set style line 5 lc rgb '#9467bd' lw 2 pt 13 ps 0.5
set style line 6 lc rgb '#8c564b' lw 2 pt 3 ps 0.5
set style line 7 lc rgb '#e377c2' lw 2 pt 1 ps 0.5
set style line 8 lc rgb '#7f7f7f' lw 2 pt 2 ps 0.5
set multiplot layout 2,2 title 'pskv training curves'
set title 'test accuracy vs time'
set xlabel 'time (s)'
set ylabel 'accuracy'
plot $(join "${plots_time_acc[@]}")
set title 'test accuracy vs epoch'
set xlabel 'epoch'
plot $(join "${plots_epoch_acc[@]}")
set key top right
set title 'test loss vs time'
set xlabel 'time (s)'
set ylabel 'test loss'
plot $(join "${plots_time_loss[@]}")
set title 'test loss vs epoch'
set xlabel 'epoch'
plot $(join "${plots_epoch_loss[@]}")
unset multiplot
EOF

plot_run "$tmp/plot.gp" "$out"
