#!/usr/bin/env bash
# Incremental checkpoint figures (docs/benchmarks.md): an incr-check job (2 servers,
# 1 worker) with --keys keys in a dense adagrad table and a sparse adam table; round 0
# writes every key, each later round --touch percent of them (default 1), and a
# checkpoint follows every round, with --full-every K (default 5: a full one, then
# 4 deltas). Per checkpoint, from the scheduler's "checkpoint N complete ... (KIND, B
# bytes)" line (both servers' files) and the servers' "written in" lines:
#   full_bytes   median bytes of the full checkpoints (after the first, which holds
#                the same rows)
#   delta_bytes  median bytes of the deltas
#   ratio        full_bytes / delta_bytes
#   full_ms, delta_ms  median time a server takes to write its file
# and whether a resume from the last delta gives that checkpoint's digest.
# Medians over every checkpoint of --runs runs.
# Usage: scripts/bench-incr.sh [--keys N] [--touch PCT] [--full-every K] [--rounds N] [--runs N]
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=${PSKV_BIN_DIR:-$here/../build/bin}
keys=1000000
touch=1
k=5
rounds=16
runs=3
while [ $# -gt 0 ]; do
  case "$1" in
    --keys) keys=$2; shift 2 ;;
    --touch) touch=$2; shift 2 ;;
    --full-every) k=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) echo "usage: $0 [--keys N] [--touch PCT] [--full-every K] [--rounds N] [--runs N]" >&2; exit 2 ;;
  esac
done
export OPENBLAS_NUM_THREADS=1
out=$(mktemp -d /tmp/pskv-bench-incr-XXXXXX)
trap 'kill -KILL $(cat "$out"/pids 2>/dev/null) 2>/dev/null; [ -n "${PSKV_KEEP_LOGS:-}" ] || rm -rf "$out"' EXIT
. "$here/bench-lib.sh"

# job DIR NAME ROUNDS [SCHEDULER FLAGS...]: 2 servers with data dirs, 1 incr-check worker
job() {
  local d=$1 name=$2 r=$3; shift 3
  data_job "$d" "$name" "$@" -- --app incr-check --check-keys "$keys" \
    --rounds "$r" --checkpoint-epochs 1 --touch "$touch" --log-level warn
}

for run in $(seq "$runs"); do
  d=$out/run$run
  job "$d" fresh "$rounds" --full-every "$k" || { echo "bench-incr: run $run failed: $(tail -n 2 "$d/w-fresh.log")" >&2; exit 1; }
done
# the first checkpoint (round 0 wrote every key) is left out: the others are at the same size
sizes() { sed -n "s/.*checkpoint \([0-9]*\) complete in [0-9]* ms ($1, \([0-9]*\) bytes).*/\1 \2/p" "$out"/run*/sched-fresh.log | awk '$1 > 1 {print $2}'; }
full_b=$(sizes full | median)
delta_b=$(sizes delta | median)
nfull=$(sizes full | wc -l)
ndelta=$(sizes delta | wc -l)
full_ms=$(cat "$out"/run*/s*-fresh.log | sed -n 's/.*checkpoint \([0-9]*\) written in \([0-9]*\) ms (full,.*/\1 \2/p' | awk '$1 > 1 {print $2}' | median)
delta_ms=$(cat "$out"/run*/s*-fresh.log | sed -n 's/.*written in \([0-9]*\) ms (delta.*/\1/p' | median)
# the last run resumed from its newest checkpoint that is a delta
d=$out/run$runs
last=$(sed -n 's/^ckpt seq=\([0-9]*\) .* kind=delta .*/\1/p' "$d/sched/manifest" | tail -n 1)
want=$(sed -n "s/^incr-check: checkpoint $last at step [0-9]* digest \([0-9a-f]*\)$/\1/p" "$d/w-fresh.log")
sed -i "/^ckpt seq=$((last + 1)) /,\$d" "$d/sched/manifest"
job "$d" resumed "$rounds" --resume --full-every "$k" > /dev/null 2>&1
got=$(sed -n 's/^incr-check: resumed at step [0-9]* digest \([0-9a-f]*\)$/\1/p' "$d/w-resumed.log")
load=$(cat "$d"/s*-resumed.log | sed -n 's/.*loaded checkpoint .* in \([0-9]*\) ms.*/\1/p' | median)
[ -n "$want" ] && [ "$got" = "$want" ] && same=yes || same=NO
awk -v k="$keys" -v t="$touch" -v e="$k" -v fb="$full_b" -v db="$delta_b" -v nf="$nfull" -v nd="$ndelta" \
  -v fm="$full_ms" -v dm="$delta_ms" -v l="$last" -v s="$same" -v ld="$load" -v r="$runs" \
  'BEGIN { printf "incr keys=%d touch_pct=%s full_every=%d runs=%d full_bytes=%s (%d) delta_bytes=%s (%d) ratio=%.1f full_ms=%s delta_ms=%s resume_from_delta=%d load_ms=%s digest_equal=%s\n", k, t, e, r, fb, nf, db, nd, (db > 0 ? fb / db : 0), fm, dm, l, ld, s }'
[ "$same" = yes ]
