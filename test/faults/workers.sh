# Fault tests (sourced by faults.sh): workers killed, rejoining, restarted, retrying.

# Kill -9 a worker mid-run: the others finish, under bsp and under ssp.
f_kill_worker() {
  local model d
  for model in bsp ssp:2; do
    d=$TDIR/$model
    launch "$d" --servers 2 --workers 3 -- --app check --consistency "$model" --rounds 4000 \
      --count-acked --dead-ok
    wait_joined "$d" 3
    sleep 0.5
    kill -KILL "$(cat "$d/worker-2.pid")"
    local pid rc
    pid=$(cat "$d/launch.pid")
    wait "$pid"; rc=$?
    # the launcher reports the lowest failing rank: the killed rank 2 (137)
    [ $rc -eq 137 ] || fail "$model: launch status $rc, expected 137 (rank 2 killed, others ok)"
    for r in 0 1; do
      grep -q 'final values' "$d/worker-$r.log" || fail "$model: worker $r did not finish"
    done
    if grep -q 'FAILED' "$d/launch.out"; then fail "$model: $(grep -h FAILED "$d/launch.out")"; fi
  done
  return 0
}

# Kill -9 a worker under bsp and start it again with its rank: it keeps the
# rank, rejoins at the slowest live worker's clock, and every worker finishes.
f_worker_rejoin() {
  local d=$TDIR/c pid i
  launch "$d" --servers 2 --workers 3 -- --app check --consistency bsp --rounds 3000 \
    --count-acked --dead-ok
  wait_joined "$d" 3
  sleep 0.5
  kill -KILL "$(cat "$d/worker-2.pid")"
  # the scheduler must first see it dead (its connection closed)
  for i in $(seq 50); do grep -q 'marked dead' "$d/scheduler.log" && break; sleep 0.1; done
  "$BIN/pskv-worker" --scheduler "127.0.0.1:$(sched_port "$d")" --rank 2 --app check \
    --consistency bsp --rounds 3000 --count-acked --dead-ok > "$d/worker-2b.log" 2>&1 &
  pid=$!
  wait "$pid" || fail "the rejoined worker failed: $(grep -h 'FAILED\|ERROR' "$d/worker-2b.log" | head -n 3)"
  grep -q 'joined a running job: starting at clock' "$d/worker-2b.log" || fail "the new worker did not start at the others' clock: $(grep -h 'joined' "$d/worker-2b.log")"
  grep -q 'worker rank 2 rejoined' "$d/scheduler.log" || fail "the scheduler did not give rank 2 back"
  local lp; lp=$(cat "$d/launch.pid")
  wait "$lp"
  for r in 0 1; do
    grep -q 'final values' "$d/worker-$r.log" || fail "worker $r did not finish"
  done
  if grep -q FAILED "$d/launch.out" "$d/worker-2b.log"; then fail "$(grep -h FAILED "$d/launch.out" "$d/worker-2b.log")"; fi
  return 0
}

# Kill -9 a worker under async (R = 2) and start it again with its rank and its
# --acked-log: it goes on from the log, the rounds end on a stop file, and
# every key ends between the pushes acknowledged to either incarnation (each
# exactly once) and those plus the killed one's pushes of unknown fate.
f_worker_restart_acked() {
  local model d pid i r opts
  for model in ${MODELS:-async}; do
    d=$TDIR/${model//:/-}
    opts=()
    for r in 0 1 2; do opts+=(--worker-opt "$r:--acked-log" --worker-opt "$r:$d/acked-$r"); done
    launch "$d" --servers 2 --workers 3 --scheduler-opt=--replicas=2 "${opts[@]}" -- --app check \
      --consistency "$model" --count-acked --rounds 1000000 --stop-file "$d/stop" --slowdown 1.2
    wait_joined "$d" 3
    sleep 0.$((5 + RANDOM % 5))
    kill -KILL "$(cat "$d/worker-2.pid")"
    for i in $(seq 50); do grep -q 'rank 2 .*marked dead' "$d/scheduler.log" && break; sleep 0.1; done
    : > "$d/worker-2b.log"
    "$BIN/pskv-worker" --scheduler "127.0.0.1:$(sched_port "$d")" --rank 2 --app check \
      --consistency "$model" --count-acked --rounds 1000000 --stop-file "$d/stop" --slowdown 1.2 \
      --acked-log "$d/acked-2" > "$d/worker-2b.log" 2>&1 &
    pid=$!
    for i in $(seq 100); do grep -q 'joined job' "$d/worker-2b.log" && break; sleep 0.1; done
    sleep 1
    touch "$d/stop"
    wait_exit_ok "$pid" "$model: the restarted worker"
    wait "$(cat "$d/launch.pid")"
    for r in 0 1 2b; do
      grep -q 'final values equal the acknowledged pushes: yes' "$d/worker-$r.log" ||
        fail "$model: worker $r: $(grep -h 'check' "$d/worker-$r.log" | tail -n 2)"
    done
    grep -q 'rank 2 over 2 incarnations' "$d/worker-2b.log" ||
      fail "$model: the restarted worker did not go on from the log: $(grep 'check:' "$d/worker-2b.log")"
    echo "$model: $(grep -o 'rank 2 over .*failed' "$d/worker-2b.log")"
  done
  return 0
}

# The same under ssp:2: the restarted worker starts at the slowest live worker's
# clock and tells every server so first thing; a server that held the dead
# worker's clock for the rank must not make its pulls, or the others', wait on it.
f_worker_restart_ssp() { MODELS=ssp:2 f_worker_restart_acked; }

# A server paused (SIGSTOP) shorter than the death time-out: the workers hear
# nothing, ask again after --retry-ms, and the server, resumed, drops the copies
# it already applied (R = 1): every key still equals the sum of the pushes.
tags retry_paused serial
f_retry_paused() {
  local d=$TDIR/c pid
  launch "$d" --servers 2 --workers 3 -- --app check --rounds 2500 --retry-ms 100
  wait_joined "$d" 3
  sleep 0.4
  pid=$(cat "$d/server-1.pid")
  kill -STOP "$pid"; sleep 0.35; kill -CONT "$pid"
  wait_ok "$d"
  grep -q 'asking again' "$d"/worker-*.log || fail "no worker asked again during the pause"
  grep -q 'marked dead' "$d/scheduler.log" && fail "the pause was long enough to declare a death"
  return 0
}
