#!/usr/bin/env bash
# plot-timeline.sh - one mini-batch of --app pipeline across its stages, drawn
# like the GPipe paper's figure: a row per stage (stage 0 on top), time to the
# right, each forward pass a light box and each backward pass a dark one
# labelled with its micro-batch, sends orange, the servers' pull and push grey; the white
# gaps are the bubble.
#
# Usage:
#   scripts/plot-timeline.sh LOGDIR... -o timeline.png [--pipeline D]
#
# Input: the stages' logs (worker-*.log in each LOGDIR, or log files given
# directly) of a job run with --timeline-step N, whose lines read
#   timeline pipeline D stage K KIND MICRO T0_US T1_US
# (KIND F forward, B backward, W waiting for a neighbour, S servers, X sending; times on
# CLOCK_MONOTONIC, so the stages must share a host for one time axis). Always
# prints a text rendering (a row per stage, one character per column of time:
# F/f forward, B/b backward alternating by micro-batch, x sending, s servers,
# . idle) and
# each stage's idle share of the mini-batch; draws the PNG with gnuplot when it
# is installed (Debian/Ubuntu: apt-get install gnuplot-nox).
#
# Exit status: 0 written, 1 no timeline lines or gnuplot missing/failing (the
# text is printed anyway), 2 bad arguments.
set -u

prog=plot-timeline.sh
usage() {
  echo "usage: scripts/plot-timeline.sh LOGDIR|LOGFILE... -o timeline.png [--pipeline D]" >&2
  exit 2
}
out='' pipe=0
inputs=()
while [ $# -gt 0 ]; do
  case "$1" in
    -o|--output) { [ $# -ge 2 ] && [ -n "$2" ]; } || usage; out=$2; shift 2 ;;
    --pipeline) { [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+$ ]]; } || usage; pipe=$2; shift 2 ;;
    -h|--help) usage ;;
    -?*) echo "$prog: unknown option $1" >&2; usage ;;
    *) inputs+=("$1"); shift ;;
  esac
done
[ -n "$out" ] || { echo "$prog: -o OUTPUT.png is required" >&2; usage; }
[ ${#inputs[@]} -gt 0 ] || { echo "$prog: no log directory given" >&2; usage; }
files=()
for f in "${inputs[@]}"; do
  if [ -d "$f" ]; then
    for g in "$f"/worker-*.log; do [ -f "$g" ] && files+=("$g"); done
  elif [ -r "$f" ]; then
    files+=("$f")
  else
    echo "$prog: cannot read $f" >&2; usage
  fi
done
[ ${#files[@]} -gt 0 ] || { echo "$prog: no worker-*.log in ${inputs[*]}" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pskv-timeline-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# "stage kind micro t0_ms t1_ms" from the mini-batch's first event on.
awk -v p="$pipe" '$1 == "timeline" && $2 == "pipeline" && $3 == p && $4 == "stage" {
    n++; k[n] = $5; kind[n] = $6; m[n] = $7; a[n] = $8; b[n] = $9
    if (t0 == "" || $8 < t0) t0 = $8
  }
  END {
    for (i = 1; i <= n; i++)
      printf "%d %s %d %.3f %.3f\n", k[i], kind[i], m[i], (a[i] - t0) / 1000, (b[i] - t0) / 1000
  }' "${files[@]}" | sort -k1,1n -k4,4n > "$tmp/ev"
[ -s "$tmp/ev" ] || { echo "$prog: no 'timeline pipeline $pipe' lines (run with --timeline-step N)" >&2; exit 1; }

# The text rendering and the idle shares (W over F + B + W, as the stages count).
awk -v cols=100 'BEGIN { S = 0; end = 0 }
  { k = $1 + 0; if (k > S) S = k; if ($5 > end) end = $5; ev[NR] = $0 }
  $2 == "W" { w[k] += $5 - $4 } $2 == "F" || $2 == "B" { busy[k] += $5 - $4 }
  END {
    printf "one mini-batch, %.1f ms (%d columns of %.2f ms)\n", end, cols, end / cols
    for (s = 0; s <= S; s++) { row[s] = ""; for (c = 0; c < cols; c++) row[s] = row[s] "." }
    for (i = 1; i <= NR; i++) {
      split(ev[i], f, " ")
      ch = f[2] == "F" ? (f[3] % 2 ? "f" : "F") : f[2] == "B" ? (f[3] % 2 ? "b" : "B") : f[2] == "S" ? "s" : f[2] == "X" ? "x" : ""
      if (ch == "") continue
      c0 = int(f[4] / end * cols); c1 = int(f[5] / end * cols)
      for (c = c0; c <= c1 && c < cols; c++) row[f[1]] = substr(row[f[1]], 1, c) ch substr(row[f[1]], c + 2)
    }
    for (s = 0; s <= S; s++) {
      t = busy[s] + w[s]
      printf "stage %d |%s| idle share %.3f\n", s, row[s], (t > 0 ? w[s] / t : 0)
    }
  }' "$tmp/ev"

if ! command -v gnuplot >/dev/null 2>&1; then
  echo "$prog: gnuplot not found; install it (Debian/Ubuntu: sudo apt-get install gnuplot-nox)" >&2
  exit 1
fi
stages=$(awk 'BEGIN { s = 0 } $1 > s { s = $1 } END { print s + 1 }' "$tmp/ev")
# boxes: x center, y, half width, half height, colour; labels for F and B
awk '$2 != "W" { c = $2 == "F" ? "0x9ecae1" : $2 == "B" ? "0x3182bd" : $2 == "X" ? "0xfd8d3c" : "0xbbbbbb"
  printf "%.3f %d %.3f 0.38 %s %s\n", ($4 + $5) / 2, $1, ($5 - $4) / 2, c, ($2 == "F" || $2 == "B") ? $3 : "\"\"" }' \
  "$tmp/ev" > "$tmp/boxes"
. "$(dirname "$0")/plot-lib.sh"
term=$(plot_term 1400 $((160 + 90 * stages)))
cat > "$tmp/plot.gp" <<EOF
set terminal $term
set output $(gq "$out")
set title 'pipeline $pipe, one mini-batch: forward (light), backward (dark), sending (orange), servers (grey); white = bubble' noenhanced
set xlabel 'time (ms)'
set yrange [$stages - 0.5:-0.5]
set ytics 1
set ylabel 'stage'
set xrange [0:*]
set grid xtics
unset key
plot $(gq "$tmp/boxes") using 1:2:3:4:5 with boxxyerror fs solid 1.0 border lc rgb '#333333' lc rgb variable, \
     '' using 1:2:6 with labels font ',8'
EOF
plot_run "$tmp/plot.gp" "$out"
