#!/usr/bin/env bash
# Checkpoint figures (docs/benchmarks.md): a dense table of --mib MiB of
# parameters (plain sgd: no optimizer state) on 2 servers,
# 1 worker pushing and pulling it (--app bench, pipelined):
#   write_ms   median time a server takes to write its checkpoint file (from the
#              request to the file renamed into place; written in the background)
#   pause_ms   median time a server stops serving for the snapshot it writes
#   load_ms    median time a server of the resumed job takes to load it
#   step_ratio push+pull step time with a checkpoint every --every s, over the
#              same run without checkpoints (> 1: slower), same sitting
# Usage: scripts/bench-checkpoint.sh [--mib N] [--every SEC] [--runs N]
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=${PSKV_BIN_DIR:-$here/../build/bin}
mib=100
every=2
runs=5
while [ $# -gt 0 ]; do
  case "$1" in
    --mib) mib=$2; shift 2 ;;
    --every) every=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) echo "usage: $0 [--mib N] [--every SEC] [--runs N]" >&2; exit 2 ;;
  esac
done
export OPENBLAS_NUM_THREADS=1
out=$(mktemp -d /tmp/pskv-bench-ckpt-XXXXXX)
trap 'kill -KILL $(cat "$out"/pids 2>/dev/null) 2>/dev/null; [ -n "${PSKV_KEEP_LOGS:-}" ] || rm -rf "$out"' EXIT
. "$here/bench-lib.sh"
size=$((mib * 1048576))

# job DIR NAME [SCHEDULER FLAGS...]: 2 servers with data dirs, 1 bench worker; waits for it
job() {
  local d=$1 name=$2; shift 2
  data_job "$d" "$name" "$@" -- --app bench --size "$size" --mode pipelined \
    --runs "$runs" --steps 8 --warmup 2 --log-level warn
}

d=$out/run
job "$d" plain || { echo "bench-checkpoint: the run without checkpoints failed" >&2; exit 1; }
plain=$(sed -n 's/^bench size=[0-9]* mode=pipelined step_us=\([0-9.]*\).*/\1/p' "$d/w-plain.log")
rm -rf "$d"
job "$d" ckpt --checkpoint-every "$every" || { echo "bench-checkpoint: the run with checkpoints failed" >&2; exit 1; }
with=$(sed -n 's/^bench size=[0-9]* mode=pipelined step_us=\([0-9.]*\).*/\1/p' "$d/w-ckpt.log")
n=$(grep -c 'complete in' "$d/sched-ckpt.log")
write=$(cat "$d"/s*-ckpt.log | sed -n 's/.*checkpoint [0-9]* written in \([0-9]*\) ms.*/\1/p' | median)
pause=$(cat "$d"/s*-ckpt.log | sed -n 's/.*serving paused \([0-9]*\) ms.*/\1/p' | median)
bytes=$(du -cb "$d"/s0/ckpt-*.pskv "$d"/s1/ckpt-*.pskv 2>/dev/null | tail -n 1 | cut -f1)
files=$(ls "$d"/s0/ckpt-*.pskv "$d"/s1/ckpt-*.pskv 2>/dev/null | wc -l)
# resume from the newest: the servers load their files before serving
job "$d" resumed --resume > /dev/null 2>&1
load=$(cat "$d"/s*-resumed.log | sed -n 's/.*loaded checkpoint .* in \([0-9]*\) ms.*/\1/p' | median)
awk -v m="$mib" -v n="$n" -v w="$write" -v l="$load" -v q="$pause" -v p="$plain" -v c="$with" -v b="$bytes" -v f="$files" \
  'BEGIN { printf "checkpoint params_mib=%d checkpoints=%d file_mib_per_server=%.1f write_ms=%s pause_ms=%s load_ms=%s step_us_plain=%.0f step_us_with_checkpoints=%.0f step_ratio=%.2f\n", m, n, (f ? b / f / 1048576 : 0), w, q, l, p, c, c / p }'
