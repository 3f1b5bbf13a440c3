# Fault tests (sourced by faults.sh): pskvctl drain under each model, R = 1, a joined
# server, and waiting.

# The drain scenarios run with a death time-out of 2 s (5 s where a server is paused
# on purpose): they kill nobody, and a worker starved past 500 ms on a loaded machine
# would be declared dead and fail a bsp check for reasons of its own.

# pskvctl drain NODE of DIR; its output in DIR/drain.out, its status returned.
drain_node() {
  "$BIN/pskvctl" --scheduler "127.0.0.1:$(sched_port "$1")" drain "$2" --drain-timeout 60 \
    > "$1/drain.out" 2>&1
}

# server_id DIR NAME: the node id of DIR's server NAME (server-I), from status.
server_id() {
  status_json "$1" | grep -o "\"id\":[0-9]*,\"role\":\"server\",[^{]*\"pid\":$(cat "$1/$2.pid")," |
    sed 's/^"id":\([0-9]*\),.*/\1/'
}

# drained_ok DIR NAME ID [UNTIMED]: pskvctl drained server NAME (node ID), which logged
# why and exited 0 on its own; status shows it left and not dead. Prints the drain's
# time (drain_ms) unless UNTIMED (a drain held up on purpose).
drained_ok() {
  local d=$1 pid i js
  pid=$(cat "$d/$2.pid")
  grep -q "^drained node $3: [0-9]* partitions handed over" "$d/drain.out" ||
    fail "pskvctl drain $3: $(cat "$d/drain.out")"
  for i in $(seq $((100 * TS))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && fail "the drained $2 did not exit"
  grep -q 'drained (pskvctl drain)' "$d/$2.log" || fail "$2 did not log its drain"
  for i in $(seq 50); do grep -q "$2 (pid $pid) exited" "$d/launch.out" && break; sleep 0.1; done
  grep -q "$2 (pid $pid) exited with status 0" "$d/launch.out" ||
    fail "the drained $2: $(grep "$2 (pid" "$d/launch.out")"
  js=$(status_json "$d") || fail "no status"
  grep -q "\"id\":$3,[^}]*\"state\":\"left\",\"alive\":false" <<< "$js" ||
    fail "status does not show node $3 left: $js"
  grep -q "(server rank .*marked dead" "$d/scheduler.log" && fail "a server was declared dead during the drain"
  [ -n "${4:-}" ] || drain_ms "$d" "$3"
  return 0
}

# drain_ms DIR ID: prints drain_ms=N, the scheduler's time from accepting the drain of
# node ID to letting it go (its log's time stamps).
drain_ms() {
  local t0 t1
  t0=$(stamp_ms "$(grep "draining server node $2 " "$1/scheduler.log" | tail -n 1)")
  t1=$(stamp_ms "$(grep "server node $2 drained:" "$1/scheduler.log" | tail -n 1)")
  [ -n "$t0" ] && [ -n "$t1" ] && echo "drain_ms=$((t1 - t0))"
  return 0
}

# Drain one of 3 servers (R = 2) while 3 workers push (--count-acked: one push per
# partition, each counted when acknowledged): pskvctl drain hands its partitions
# to the other two (each new chain member copied whole before it answers for
# them) and the server exits 0; status shows it left, 2 servers live, the scheduler's
# metrics count a drain and no failover, and every key ends equal to the pushes
# acknowledged (none lost, none applied twice). First the
# refusals, each exit 1 with the reason: an unknown node, a worker; after the drain,
# one that would leave fewer servers than R.
tags drain once figure
f_drain() {
  local d=$TDIR/c v id wid js mp m
  mp=$(free_port)
  # shellcheck disable=SC2086 # DRAIN_ARGS: several words
  launch "$d" --servers 3 --workers 3 --scheduler-opt=--replicas=2 \
    --scheduler-opt=--metrics-port=$mp -- --app check \
    --count-acked --rounds 1000000 --stop-file "$d/stop" ${DRAIN_ARGS:-}
  wait_joined "$d" 3
  drain_node "$d" 999 && fail "drained node 999"
  grep -q 'refused: node 999 is not in the job' "$d/drain.out" || fail "unclear: $(cat "$d/drain.out")"
  wid=$(status_json "$d" | grep -o '"id":[0-9]*,"role":"worker"' | head -n 1 | sed 's/[^0-9]//g')
  drain_node "$d" "$wid" && fail "drained worker node $wid"
  grep -q "refused: node $wid (worker) is not a server" "$d/drain.out" || fail "unclear: $(cat "$d/drain.out")"
  sleep 0.$((5 + RANDOM % 5))
  v=server-$((RANDOM % 3))
  id=$(server_id "$d" "$v")
  [ -n "$id" ] || fail "no node id for $v"
  drain_node "$d" "$id" || fail "pskvctl drain $id: $(cat "$d/drain.out")"
  drained_ok "$d" "$v" "$id"
  m=$(curl -sf "http://127.0.0.1:$mp/metrics") || fail "no scheduler metrics"
  grep -q '^pskv_drains_total{[^}]*} 1$' <<< "$m" && grep -q '^pskv_failovers_total{[^}]*} 0$' <<< "$m" ||
    fail "metrics: $(grep 'drains_total\|failovers_total' <<< "$m")"
  js=$(status_json "$d")
  [ "$(grep -o '"role":"server",[^}]*"state":"active","alive":true' <<< "$js" | wc -l)" -eq 2 ] ||
    fail "not 2 live servers after the drain: $js"
  id=$(grep -o '"id":[0-9]*,"role":"server",[^}]*"state":"active"' <<< "$js" | head -n 1 | sed 's/^"id":\([0-9]*\),.*/\1/')
  drain_node "$d" "$id" && fail "drained a server below R"
  grep -q "refused: draining server node $id would leave 1 live server, fewer than R = 2" \
    "$d/drain.out" || fail "unclear: $(cat "$d/drain.out")"
  sleep 1
  touch "$d/stop"
  wait_ok "$d"
  echo "drain: $(head -n 2 "$d/drain.out" | tr '\n' ' ')"
}

# The same drain under bounded delay (ssp:2): the bound holds and the sums are exact.
tags drain_ssp once figure
f_drain_ssp() { DRAIN_ARGS="--consistency ssp:2" f_drain; }

# R = 1: a drained server's partitions have no other replica; it hands each to
# its new head itself. Two of 3 servers are drained one after the other (the
# second named by its HOST:PORT); the last one is refused (the last server), and
# the sums stay exact.
tags drain_r1 once figure
f_drain_r1() {
  local d=$TDIR/c v id k a
  launch "$d" --servers 3 --workers 3 -- \
    --app check --count-acked --rounds 1000000 --stop-file "$d/stop"
  wait_joined "$d" 3
  for k in 0 1; do
    sleep 0.$((3 + RANDOM % 5))
    v=server-$k
    id=$(server_id "$d" "$v")
    # the first by node id, the second by the HOST:PORT status shows
    a=$id
    [ $k -eq 1 ] && a=$(status_json "$d" | grep -o "\"id\":$id,\"role\":\"server\",\"rank\":[0-9]*,\"host\":\"[^\"]*\",\"port\":[0-9]*" |
      sed 's/.*"host":"\([^"]*\)","port":\([0-9]*\)$/\1:\2/')
    drain_node "$d" "$a" || fail "pskvctl drain $a: $(cat "$d/drain.out")"
    drained_ok "$d" "$v" "$id"
  done
  id=$(server_id "$d" server-2)
  drain_node "$d" "$id" && fail "drained the last server"
  grep -q "refused: server node $id is the last live server" "$d/drain.out" ||
    fail "unclear: $(cat "$d/drain.out")"
  sleep 0.5
  touch "$d/stop"
  wait_ok "$d"
}

# Elastic up and down (R = 1): a third server joins the running job while server-1
# is paused (SIGSTOP, short of the death time-out), so the joiner cannot have its
# copies from it yet, and is drained at once: the scheduler says not yet (copies
# under way) and pskvctl asks again until, server-1 resumed, the joiner holds its
# partitions whole; then it hands every partition back and exits 0, and every key
# equals the pushes acknowledged.
tags drain_joined once figure
f_drain_joined() {
  local d=$TDIR/c i id pid s1 dpid
  launch "$d" --servers 2 --workers 2 -- \
    --app check --count-acked --rounds 1000000 --stop-file "$d/stop"
  wait_joined "$d" 2
  sleep 0.3
  s1=$(cat "$d/server-1.pid")
  kill -STOP "$s1"
  start_server "$d" server-2
  pid=$(cat "$d/server-2.pid")
  for i in $(seq $((100 * TS))); do
    kill -0 "$(cat "$d/scheduler.pid")" 2>/dev/null || fail "the scheduler is gone: $(tail -n 2 "$d/scheduler.log")"
    id=$(server_id "$d" server-2); [ -n "$id" ] && break; sleep 0.05
  done
  [ -n "$id" ] || { kill -CONT "$s1"; fail "server-2 did not join"; }
  drain_node "$d" "$id" &
  dpid=$!
  sleep 1
  kill -CONT "$s1"
  wait "$dpid" || fail "pskvctl drain $id: $(cat "$d/drain.out")"
  grep -q "refused DRAIN .*copies under way" "$d/scheduler.log" ||
    fail "the drain did not wait for the join's copies"
  grep -q "^drained node $id: [0-9]* partitions handed over" "$d/drain.out" ||
    fail "pskvctl drain $id: $(cat "$d/drain.out")"
  wait_exit_ok "$pid" "the drained server-2"
  grep -q 'drained (pskvctl drain)' "$d/server-2.log" || fail "server-2 did not log its drain"
  sleep 0.5
  touch "$d/stop"
  wait_ok "$d"
  echo "joined and drained: $(head -n 1 "$d/drain.out")"
}

# The drained server waits for the copies (R = 2, death time-out 5 s): server-2 is
# paused (SIGSTOP) and server-0 drained; while server-2 cannot take the new view
# status shows server-0 "draining" and it keeps running (pskvctl waits); once
# server-2 resumes and holds its partitions whole, server-0 is let go and exits 0,
# and every key equals the pushes acknowledged.
tags drain_wait once
f_drain_wait() {
  local d=$TDIR/c i id s2 dpid js
  launch "$d" --servers 3 --workers 2 --scheduler-opt=--replicas=2 \
    -- --app check --count-acked \
    --rounds 1000000 --stop-file "$d/stop"
  wait_joined "$d" 2
  sleep 0.5
  id=$(server_id "$d" server-0)
  s2=$(cat "$d/server-2.pid")
  kill -STOP "$s2"
  drain_node "$d" "$id" &
  dpid=$!
  for i in $(seq 50); do
    js=$(status_json "$d") && grep -q "\"id\":$id,[^}]*\"state\":\"draining\",\"alive\":true" <<< "$js" && break
    sleep 0.1
  done
  grep -q "\"id\":$id,[^}]*\"state\":\"draining\"" <<< "$js" || { kill -CONT "$s2"; fail "status does not show node $id draining: $js"; }
  sleep 1
  kill -0 "$(cat "$d/server-0.pid")" 2>/dev/null || { kill -CONT "$s2"; fail "server-0 left before server-2 could hold its partitions"; }
  kill -0 "$dpid" 2>/dev/null || { kill -CONT "$s2"; fail "pskvctl drain returned early: $(cat "$d/drain.out")"; }
  kill -CONT "$s2"
  wait "$dpid" || fail "pskvctl drain $id: $(cat "$d/drain.out")"
  drained_ok "$d" server-0 "$id" untimed
  sleep 0.5
  touch "$d/stop"
  wait_ok "$d"
  echo "waited: $(tail -n 1 "$d/drain.out")"
}

# Drain under bsp (R = 2): held pushes and clock closes move to the new heads, and
# every pull at clock c still returns exactly the sums of the rounds before c.
tags drain_bsp once figure
f_drain_bsp() {
  local d=$TDIR/c v id
  launch "$d" --servers 3 --workers 3 --scheduler-opt=--replicas=2 \
    -- --app check --consistency bsp --rounds 400
  wait_joined "$d" 3
  sleep 1.$((RANDOM % 10))
  v=server-$((RANDOM % 3))
  id=$(server_id "$d" "$v")
  drain_node "$d" "$id" || fail "pskvctl drain $id: $(cat "$d/drain.out")"
  drained_ok "$d" "$v" "$id"
  wait_ok "$d"
}

# ---- all-reduce training (--sync allreduce) through a worker's death ----------
AR_ARGS="--app mlp --epochs 6 --train-limit 6000 --test-limit 1000 --eval-every 0 --seed 3
  --sync allreduce --copy-every 10 --print-digests"
