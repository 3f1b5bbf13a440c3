#!/usr/bin/env bash
# All-reduce benchmark: pskv_allreduce among N workers on this host (loopback TCP),
# beside its floor measured in the same sitting. For each N and size, rank 0's line
#   allreduce size=BYTES workers=N step_us=... algbw_GBps=... busbw_GBps=... wire=W
# (the median of --runs runs of `bench --op allreduce`; algbw = size / step, busbw =
# algbw x 2(N-1)/N), then, per --floor-runs, pskv-zmq-bidir's two lines (MB/s per
# direction of two processes each sending and receiving 8 MiB messages at once: a
# 2-rank ring step over raw ZeroMQ), before and after the all-reduces.
# Usage: scripts/bench-allreduce.sh [--sizes "1048576 16777216"] [--workers "2 3"]
#        [--runs N (default 5)] [--floor-runs N (default 3)] [--wires "fp32 fp16"]
#        (--wires: each size in each wire precision, default fp32; BYTES is the
#        floats' size in memory, so fp16 sends half of it and algbw counts BYTES)
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=${PSKV_BIN_DIR:-$here/../build/bin}
sizes="1048576 16777216"
workers="2 3"
runs=5
floor_runs=3
wires=fp32
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) sizes=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --floor-runs) floor_runs=$2; shift 2 ;;
    --wires) wires=$2; shift 2 ;;
    *) echo "usage: $0 [--sizes \"BYTES...\"] [--workers \"N...\"] [--runs N] [--floor-runs N] [--wires \"W...\"]" >&2
       exit 2 ;;
  esac
done
export OPENBLAS_NUM_THREADS=1
out=$(mktemp -d /tmp/pskv-bench-ar-XXXXXX)
trap 'rm -rf "$out"' EXIT

floor() {
  local i
  for i in $(seq "$floor_runs"); do
    "$bin/pskv-zmq-bidir" --size 8388608 --count 50 || echo "pskv-zmq-bidir failed" >&2
  done
}

floor
for n in $workers; do
  for size in $sizes; do
    for wire in $wires; do
      d="$out/n$n-$size-$wire"
      if ! PSKV_BIN_DIR=$bin "$here/launch-local.sh" --servers 1 --workers "$n" --timeout 600 \
          --log-dir "$d" -- \
          --app bench --op allreduce --size "$size" --runs "$runs" --wire "$wire" > "$d.out" 2>&1; then
        echo "n=$n size=$size wire=$wire: the job failed: $(grep -h 'failed' "$d"/worker-*.log | head -n 1)" >&2
        continue
      fi
      grep -h '^allreduce size=' "$d/worker-0.log"
    done
  done
done
floor
