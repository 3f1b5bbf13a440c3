# Fault tests (sourced by faults.sh): all-reduce training (--sync allreduce) through a
# worker's death.

# ar_launch DIR ARGS...: 3 workers training mlp by all-reduce (750 steps), 1 server.
ar_launch() {
  # shellcheck disable=SC2086
  launch "$1" --servers 1 --workers 3 -- $AR_ARGS "${@:2}"
}

# ar_kill DIR RANK LOG N: once LOG shows N steps, kill -9 the worker whose pid is
# in DIR/LOG's .pid file and wait until the scheduler marked rank RANK dead again.
ar_kill() {
  local d=$1 r=$2 log=$3 n=$4 i dead
  for i in $(seq $((600 * TS))); do
    [ "$(cat "$d/$log.log" 2>/dev/null | grep -c '^allreduce step')" -ge "$n" ] && break
    sleep 0.05
  done
  [ "$(grep -c '^allreduce step' "$d/$log.log")" -ge "$n" ] || fail "$log made no $n steps: $(tail -n 2 "$d/$log.log")"
  dead=$(grep -c "worker rank $r at .*marked dead" "$d/scheduler.log")
  kill -KILL "$(cat "$d/$log.pid")"
  for i in $(seq $((100 * TS))); do
    [ "$(grep -c "worker rank $r at .*marked dead" "$d/scheduler.log")" -gt "$dead" ] && return 0
    sleep 0.1
  done
  fail "rank $r was not marked dead"
}

# ar_replace DIR RANK NAME: a worker started with --rank RANK (log DIR/NAME.log, pid DIR/NAME.pid).
ar_replace() {
  # shellcheck disable=SC2086
  "$BIN/pskv-worker" --scheduler "127.0.0.1:$(sched_port "$1")" --rank "$2" $AR_ARGS \
    --rejoin-timeout $((30 * TS)) > "$1/$3.log" 2>&1 &
  echo $! > "$1/$3.pid"
}

# ar_same DIR LOGS...: the job completed, every LOG (one per rank) went on from the
# same step of the servers' copy, from then on each step's weights are the same
# bits on every rank (the digest printed last for the step: the steps after the
# copy are done again), and the final accuracy is above 0.7.
ar_same() {
  local d=$1 f steps acc; shift
  for f in "$@"; do
    grep -q '^rank [0-9]* trained [0-9]* samples' "$d/$f.log" || fail "$f did not finish: $(grep 'train:' "$d/$f.log")"
  done
  steps=$(for f in "$@"; do sed -n 's/^allreduce: rank [0-9]* goes on at step \([0-9]*\) .*digest \([0-9a-f]*\).*/\1 \2/p' "$d/$f.log" | tail -n 1; done | sort -u)
  [ "$(wc -l <<< "$steps")" -eq 1 ] && [ -n "$steps" ] || fail "the ranks went on from different copies: $steps"
  local s=${steps% *}
  [ $((s % 10)) -eq 0 ] && [ "$s" -gt 0 ] || fail "step $s is not one of a copy (--copy-every 10)"
  for f in "$@"; do
    awk -v s="$s" '/^allreduce step/ { if ($3 > s) d[$3] = $NF } END { for (k in d) print k, d[k] }' \
      "$d/$f.log" | sort -n > "$d/$f.digests"
    [ "$(wc -l < "$d/$f.digests")" -eq $((750 - s)) ] || fail "$f: $(wc -l < "$d/$f.digests") steps after $s, not $((750 - s))"
    cmp -s "$d/$f.digests" "$d/$1.digests" || fail "$f's weights differ from $1's: $(diff "$d/$1.digests" "$d/$f.digests" | head -n 3)"
  done
  acc=$(sed -n 's/^final test accuracy \([0-9.]*\) .*/\1/p' "$d"/*.log)
  awk -v a="$acc" 'BEGIN { exit !(a > 0.7) }' || fail "final accuracy '$acc' not above 0.7"
  echo "went on from step $s (copy digest ${steps#* }); $((750 - s)) steps alike on every rank; accuracy $acc"
}

# A worker killed (-9) mid-run, rank 0 (the one that copies the weights to the
# servers) included, and a new one started with its --rank: the others wait, every
# rank goes on from the servers' copy, and the job completes with the same
# weights on every rank.
# ar_rejoin_run DIR V: a 3-worker job in which rank V is killed mid-run and a new
# worker takes it over; the others exit 0, the killed one 137. Sets `logs` (the
# ranks' log names in rank order, "new" for V).
ar_rejoin_run() {
  local d=$1 v=$2 r
  ar_launch "$d" --rejoin-timeout $((30 * TS))
  ar_kill "$d" "$v" "worker-$v" $((150 + RANDOM % 200))
  ar_replace "$d" "$v" new
  wait_exit_ok "$(cat "$d/new.pid")" "the worker that took rank $v over"
  wait "$(cat "$d/launch.pid")"
  grep -q "workers exit statuses: $(for r in 0 1 2; do [ $r = "$v" ] && printf '137 ' || printf '0 '; done | sed 's/ $//')\$" "$d/launch.out" ||
    fail "$(grep statuses "$d/launch.out")"
  logs=()
  for r in 0 1 2; do [ "$r" = "$v" ] && logs+=(new) || logs+=("worker-$r"); done
}

tags allreduce_rejoin once
f_allreduce_rejoin() {
  local d=$TDIR/c v logs=()
  v=$((RANDOM % 3))
  ar_rejoin_run "$d" "$v"
  grep -q "rank $v \(died\|is not in the job\)" "$d/${logs[$(( (v + 1) % 3 ))]}.log" ||
    fail "the next rank did not name rank $v: $(grep '^allreduce:' "$d/${logs[$(( (v + 1) % 3 ))]}.log")"
  echo "killed rank $v"
  ar_same "$d" "${logs[@]}"
}

# The same death under ZeRO stage 1 (--zero 1: each rank updates its own slice of
# the weights, reduce-scatter then all-gather) and --balance batch (a death may
# come in the speeds' all-reduce after a step's: recovered alike): a rank other
# than 0 is killed, the new worker takes over its slice, the job completes with the
# same weights on every rank, and the split starts even again at the step they go
# on from. Ranks 1 and 2 only: rank 0's death is the test above's.
tags allreduce_zero_rejoin once
f_allreduce_zero_rejoin() {
  local d=$TDIR/c v=$((1 + RANDOM % 2)) logs=() AR_ARGS="$AR_ARGS --zero 1 --balance batch --balance-log $TDIR/c/plan"
  ar_rejoin_run "$d" "$v"
  grep -q "^zero 1: rank $v updates weights \[" "$d/new.log" || fail "the new worker did not run --zero 1: $(head -n 3 "$d/new.log")"
  echo "killed rank $v (--zero 1, --balance batch)"
  ar_same "$d" "${logs[@]}"
  local s even
  s=$(sed -n 's/^allreduce: rank [0-9]* goes on at step \([0-9]*\) .*/\1/p' "$d/worker-0.log" | tail -n 1)
  even=$(head -n 1 "$d/plan" | cut -d' ' -f2)
  grep -qx "$s $even" "$d/plan" || fail "no even split ($even) at step $s: $(tr '\n' ';' < "$d/plan")"
}

# Rank 0 (the one that copies the weights to the servers) killed, the worker that
# takes it over killed as soon as it joined (a second death during the resync), a
# third one started; later rank 1 killed and taken over: the ranks go on from a
# newer copy, which the new rank 0 made, and the job completes with the same
# weights everywhere.
tags allreduce_rejoin_twice once
f_allreduce_rejoin_twice() {
  local d=$TDIR/c i s1 s2
  ar_launch "$d" --rejoin-timeout $((30 * TS))
  ar_kill "$d" 0 worker-0 200
  ar_replace "$d" 0 new0a
  for i in $(seq $((100 * TS))); do grep -q 'joined job' "$d/new0a.log" 2>/dev/null && break; sleep 0.05; done
  ar_kill "$d" 0 new0a 0
  ar_replace "$d" 0 new0b
  for i in $(seq $((300 * TS))); do grep -q 'goes on at step' "$d/worker-2.log" && break; sleep 0.1; done
  s1=$(grep -m 1 -o 'goes on at step [0-9]*' "$d/worker-2.log" | grep -o '[0-9]*$')
  [ -n "$s1" ] || fail "rank 2 did not go on after rank 0 was taken over: $(grep '^allreduce:' "$d/worker-2.log")"
  ar_kill "$d" 1 worker-1 $((s1 + 150))
  ar_replace "$d" 1 new1
  wait_exit_ok "$(cat "$d/new0b.pid")" "the third worker of rank 0"
  wait_exit_ok "$(cat "$d/new1.pid")" "the worker that took rank 1 over"
  wait "$(cat "$d/launch.pid")"
  grep -q 'workers exit statuses: 137 137 0$' "$d/launch.out" || fail "$(grep statuses "$d/launch.out")"
  s2=$(grep -o 'goes on at step [0-9]*' "$d/worker-2.log" | tail -n 1 | grep -o '[0-9]*$')
  [ -n "$s1" ] && [ "$s2" -gt "$s1" ] || fail "the second resync went on from step $s2, not after the first's $s1"
  echo "first resync from step $s1, second from step $s2 (a copy by the new rank 0)"
  ar_same "$d" new0b new1 worker-2
}

# Nobody takes a dead rank over: while they wait, pskvctl status shows the others
# waiting for the rank; they exit 1 within --rejoin-timeout (3 s) of its death
# (+ 6 s for a loaded machine), naming the rank.
tags allreduce_rejoin_none once serial
f_allreduce_rejoin_none() {
  local d=$TDIR/c t0 v=$((RANDOM % 3)) r
  ar_launch "$d" --rejoin-timeout 3
  ar_kill "$d" "$v" "worker-$v" 150
  t0=$(now_ms)
  local js="" seen=0
  while kill -0 "$(cat "$d/launch.pid")" 2>/dev/null && [ $seen -eq 0 ]; do
    js=$(status_json "$d" --timeout 1 2>/dev/null)
    grep -q "\"role\":\"worker\",\"rank\":[0-9],[^}]*\"waiting_for_rank\":$v" <<< "$js" && seen=1
    sleep 0.1
  done
  [ $seen -eq 1 ] || fail "pskvctl status never showed a worker waiting for rank $v: $js"
  wait "$(cat "$d/launch.pid")"
  local took=$(( $(now_ms) - t0 ))
  [ $took -le $((3000 + 6000 * TS)) ] || fail "the others took $took ms to exit (--rejoin-timeout 3)"
  for r in 0 1 2; do
    [ "$r" = "$v" ] && continue
    grep -q "train: all-reduce: no worker took the dead rank over: .*rank $v has no live worker after 3000 ms" "$d/worker-$r.log" ||
      fail "rank $r: $(grep 'train:' "$d/worker-$r.log")"
  done
  grep -q 'workers exit statuses: \(1\|137\) \(1\|137\) \(1\|137\)$' "$d/launch.out" || fail "$(grep statuses "$d/launch.out")"
  echo "rank $v killed: the others exited 1 $took ms after it was marked dead"
}
