#!/usr/bin/env bash
# Two MLP trainings three ways (issue 35's figure): as two worker groups of one
# service of 2 servers (pskv-scheduler --service; groups A and B side by side), as
# the same two jobs run one after the other (each its own scheduler and 2
# servers), and as two separate clusters side by side (two schedulers, 2 servers
# each, at once). Each training is 2 workers of --app mlp; A and B differ in lr and
# seed. Wall time is from the start of a training's first process to its rank 0's
# exit; accuracy is rank 0's `final test accuracy`. Prints one line per run and,
# after the runs, the medians:
#   groups mode=service|sequential|separate a_wall_s=.. a_acc=.. b_wall_s=.. b_acc=.. total_s=..
# Usage: scripts/bench-groups.sh [--runs N (3)] [--epochs E (3)] [--train-limit N (10000)]
#        [--hidden H (64)]
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=${PSKV_BIN_DIR:-$here/../build/bin}
runs=3 epochs=3 limit=10000 hidden=64
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --train-limit) limit=$2; shift 2 ;;
    --hidden) hidden=$2; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--epochs E] [--train-limit N] [--hidden H]" >&2; exit 2 ;;
  esac
done
. "$here/free-port.sh"
. "$here/bench-lib.sh"
dir=$(mktemp -d /tmp/pskv-bench-groups.XXXXXX)
pids=()
cleanup() { local p; for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done; [ -n "${KEEP:-}" ] || rm -rf "$dir"; }
trap cleanup EXIT
app=(--app mlp --hidden "$hidden" --epochs "$epochs" --train-limit "$limit" --test-limit 2000
     --eval-every 0)
opts_a=(--lr 0.05 --seed 1)
opts_b=(--lr 0.02 --seed 2)

now() { date +%s.%N; }

# cluster NAME [FLAGS]: a scheduler on a free port with 2 servers ($PORT); waits
# until they registered.
cluster() {
  local name=$1 i
  shift
  PORT=$(free_port)
  "$bin/pskv-scheduler" --port "$PORT" --servers 2 "$@" > "$dir/$name-scheduler.log" 2>&1 &
  pids+=($!)
  for i in 0 1; do
    "$bin/pskv-server" --scheduler "127.0.0.1:$PORT" > "$dir/$name-server-$i.log" 2>&1 &
    pids+=($!)
  done
}

# training NAME PORT [FLAGS]: 2 workers in the background; rank 0's pid in RANK0.
training() {
  local name=$1 port=$2 r
  shift 2
  for r in 0 1; do
    "$bin/pskv-worker" --scheduler "127.0.0.1:$port" --rank "$r" "${app[@]}" "$@" \
      > "$dir/$name-worker-$r.log" 2>&1 &
    pids+=($!)
    [ $r = 0 ] && RANK0=$!
  done
}

# finish NAME PID T0: waits for rank 0 (a child of this shell); FIN="WALL ACC".
finish() {
  wait "$2" || { echo "$1: rank 0 failed: $(tail -n 2 "$dir/$1-worker-0.log")" >&2; exit 1; }
  local acc
  acc=$(sed -n 's/^final test accuracy \([0-9.]*\) .*/\1/p' "$dir/$1-worker-0.log")
  FIN="$(echo "$(now) - $3" | bc) ${acc:--}"
}

stop_jobs() { wait "${pids[@]}" 2> /dev/null; pids=(); }

# run_side service|separate: A and B at once, as the groups of one service or as
# two clusters; prints "A_WALL A_ACC B_WALL B_ACC TOTAL".
run_side() {
  local t0 a b pa
  t0=$(now)
  if [ "$1" = service ]; then
    cluster svc --service
    training a "$PORT" --group A --group-size 2 "${opts_a[@]}"
    pa=$RANK0
    training b "$PORT" --group B --group-size 2 "${opts_b[@]}"
  else
    cluster ja --workers 2
    training a "$PORT" "${opts_a[@]}"
    pa=$RANK0
    cluster jb --workers 2
    training b "$PORT" "${opts_b[@]}"
  fi
  finish a "$pa" "$t0"
  a=$FIN
  finish b "$RANK0" "$t0"
  b=$FIN
  if [ "$1" = service ]; then
    "$bin/pskvctl" --scheduler "127.0.0.1:$PORT" shutdown > /dev/null || exit 1
  fi
  stop_jobs
  echo "$a $b $(echo "$(now) - $t0" | bc)"
}

run_service() { run_side service; }
run_separate() { run_side separate; }

# one_job NAME FLAGS...: training NAME alone on a cluster of its own; FIN as
# finish's (its wall time from its cluster's start).
one_job() {
  local name=$1 t0
  shift
  t0=$(now)
  cluster "j$name" --workers 2
  training "$name" "$PORT" "$@"
  finish "$name" "$RANK0" "$t0"
  stop_jobs
}

run_sequential() {
  local t0 a
  t0=$(now)
  one_job a "${opts_a[@]}"
  a=$FIN
  one_job b "${opts_b[@]}"
  echo "$a $FIN $(echo "$(now) - $t0" | bc)"
}

for mode in service sequential separate; do
  : > "$dir/$mode.runs"
done
for i in $(seq "$runs"); do
  for mode in service sequential separate; do # interleaved: the load drifts alike
    read -r aw aa bw ba tot < <("run_$mode")
    [ -n "${tot:-}" ] || exit 1
    printf 'run %d mode=%s a_wall_s=%.2f a_acc=%s b_wall_s=%.2f b_acc=%s total_s=%.2f\n' \
      "$i" "$mode" "$aw" "$aa" "$bw" "$ba" "$tot"
    echo "$aw $aa $bw $ba $tot" >> "$dir/$mode.runs"
  done
done
for mode in service sequential separate; do
  f=$dir/$mode.runs
  printf 'groups mode=%s a_wall_s=%.2f a_acc=%s b_wall_s=%.2f b_acc=%s total_s=%.2f\n' "$mode" \
    "$(cut -d' ' -f1 "$f" | median)" "$(cut -d' ' -f2 "$f" | median)" \
    "$(cut -d' ' -f3 "$f" | median)" "$(cut -d' ' -f4 "$f" | median)" \
    "$(cut -d' ' -f5 "$f" | median)"
done
