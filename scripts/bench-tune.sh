#!/usr/bin/env bash
# bench-tune.sh - pskv-tune's overhead and stop delay, trials as worker groups of the
# tuner's own service (docs/benchmarks.md, issue 37).
#
# Usage: scripts/bench-tune.sh [--trials N] [--runs R] [--only overhead|stop]
#   overhead: N (200) one-second synth trials at --parallel 2, R (1) times: the run's
#             wall time against the ideal N / 2 s, and the load average beside it.
#   stop:     16 synth trials under asha:eta=3,min=1,max=9 at --parallel 2, 0.2 s
#             epochs: for each stop, the tuner's decision (its `stop after epoch` log
#             line) to the worker's `the scheduler stops the job early` line, and to
#             the tuner's `its worker gone N ms` line; medians and maxima. The metric
#             line reaches the tuner within its --poll (20 ms) before the decision.
# Binaries from $PSKV_BIN_DIR (default build/bin). Work in a mktemp -d, removed at the
# end unless PSKV_KEEP_LOGS=1.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
BIN=${PSKV_BIN_DIR:-$top/build/bin}
trials=200 runs=1 only=""
while [ $# -gt 0 ]; do
  case $1 in
    --trials) trials=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "usage: $0 [--trials N] [--runs R] [--only overhead|stop]" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d /tmp/pskv-bench-tune-XXXXXX)
[ "${PSKV_KEEP_LOGS:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
printf -- '--lr log 1e-4 0.3\n--momentum uniform 0 0.99\n' > space.txt
load() { cut -d' ' -f1 /proc/loadavg; }
ms() { date -d "$1" +%s%3N; } # an ISO log time to ms

if [ -z "$only" ] || [ "$only" = overhead ]; then
  for r in $(seq "$runs"); do
    "$BIN/pskv-tune" create o$r.db --space space.txt --algo random --max-trials "$trials" \
      --parallel 2 --trial-epochs 1 -- --app synth --synth-epoch-time 1 > /dev/null || exit 1
    l0=$(load); t0=$(date +%s%3N)
    "$BIN/pskv-tune" run o$r.db --log-level warn || exit 1
    t1=$(date +%s%3N); l1=$(load)
    awk -v n="$trials" -v t=$((t1 - t0)) -v a="$l0" -v b="$l1" 'BEGIN {
      ideal = n / 2 * 1000
      printf "overhead: %d trials in %.1f s against the ideal %.1f s: %+.1f %% (load %s -> %s)\n",
        n, t / 1000, ideal / 1000, (t / ideal - 1) * 100, a, b }'
  done
fi

if [ -z "$only" ] || [ "$only" = stop ]; then
  "$BIN/pskv-tune" create s.db --space space.txt --algo random --sched asha:eta=3,min=1,max=9 \
    --max-trials 16 --parallel 2 --seed 3 -- --app synth --synth-epoch-time 0.2 > /dev/null || exit 1
  l0=$(load)
  "$BIN/pskv-tune" run s.db > s.out 2>&1 || { tail -3 s.out; exit 1; }
  : > stops
  while read -r when id; do
    w=$(sed -n 's/^\([^ ]*\) .*the scheduler stops the job early.*/\1/p' \
      "s.db.d/trial-$id/logs/worker-0.log" | head -n 1)
    gone=$(sed -n "s/.*trial $id: its worker gone \\([0-9]*\\) ms.*/\\1/p" s.out)
    [ -n "$w" ] && echo "$(($(ms "$w") - $(ms "$when"))) ${gone:-?}" >> stops
  done < <(sed -n 's/^\([^ ]*\) .*trial \([0-9]*\): stop after epoch.*/\1 \2/p' s.out)
  awk -v l="$l0 -> $(load)" '{ a[NR] = $1; b[NR] = $2 }
    function med(v, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j-1] > v[j]; j--) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
      return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
    END { if (!NR) { print "stop: no trial stopped"; exit 1 }
      printf "stop: %d stops; decision to the worker told: median %s ms, max %s ms; to the worker gone: median %s ms, max %s ms (load %s)\n",
        NR, med(a, NR), a[NR], med(b, NR), b[NR], l }' stops
fi
