# shellcheck shell=bash
# plot-lib.sh - what the gnuplot scripts (plot.sh, plot-timeline.sh) share;
# sourced, with $prog set to the caller's name.

# gnuplot single-quoted string: a quote is written twice.
gq() { printf "'%s'" "${1//\'/\'\'}"; }

# plot_term W H: the terminal line for a W x H PNG (pngcairo when it is there).
plot_term() {
  if gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1; then
    echo "pngcairo size $1,$2 font ',10'"
  else
    echo "png size $1,$2"
  fi
}

# plot_run GPFILE OUT: runs gnuplot on GPFILE, which writes OUT; says so.
# Returns 1 after saying why when gnuplot fails or writes nothing.
plot_run() {
  local err
  if ! err=$(gnuplot "$1" 2>&1); then
    echo "${prog:-plot}: gnuplot failed:" >&2
    echo "$err" >&2
    return 1
  fi
  [ -z "$err" ] || echo "$err" >&2
  [ -s "$2" ] || { echo "${prog:-plot}: gnuplot wrote nothing to $2" >&2; return 1; }
  echo "${prog:-plot}: wrote $2"
}
