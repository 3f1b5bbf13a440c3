# Fault tests (sourced by faults.sh): kill -9 of a server during a push stream, with
# shared memory, the key cache, fp16, ssp and bsp; chains of 3; a late view under bsp.

# Kill -9 one of 3 servers (R = 2) during a push stream of 4 workers: the job
# goes on and every key equals the sum of the acknowledged pushes.
tags kill_server figure
f_kill_server() {
  local d=$TDIR/c victim t0
  launch "$d" --servers 3 --workers 4 --scheduler-opt=--replicas=2 -- --app check --rounds 1200
  wait_joined "$d" 4
  sleep 0.$((3 + RANDOM % 5))
  victim=$((RANDOM % 3))
  t0=$(now_ms)
  kill -KILL "$(cat "$d/server-$victim.pid")"
  wait_ok "$d"
  local f; f=$(failover_ms "$d" "$t0") || exit 1
  echo "failover_ms=$f"
}

# The kill with the workers' --shm: push and pull values (parts of 64 KiB and more:
# 40000 keys) go through shared memory, not TCP. The dead server's parts go again to
# the new heads through their segments, the dead one's segment is retired, the sums
# stay exact, and no segment is left in /dev/shm. Worker 3 reads the dense table
# through views (pskv_pull_view: --pull view), copied from its parts after the failover.
tags kill_server_shm shm once figure
f_kill_server_shm() {
  local d=$TDIR/c pids p t0 f
  launch "$d" --servers 3 --workers 4 --scheduler-opt=--replicas=2 \
    --worker-opt 3:--pull --worker-opt 3:view -- --app check --rounds 150 \
    --check-keys 40000 --shm --log-level info
  wait_joined "$d" 4
  sleep 0.$((3 + RANDOM % 5))
  t0=$(now_ms)
  kill -KILL "$(cat "$d/server-$((RANDOM % 3)).pid")"
  wait_ok "$d"
  f=$(failover_ms "$d" "$t0") || exit 1
  echo "failover_ms=$f"
  [ "$(grep -l 'mapped shared-memory segment' "$d"/server-*.log | wc -l)" -ge 2 ] ||
    fail "the servers mapped no shared memory"
  grep -q 'no shared memory' "$d"/worker-*.log && fail "a server refused shared memory"
  pids=$(sed -n 's/^[^ ]* \([0-9]*\) worker .*joined job.*/\1/p' "$d"/worker-*.log)
  for p in $pids; do
    ls /dev/shm | grep -q "^pskv-[0-9]*-$p-" && fail "worker pid $p left a segment in /dev/shm"
  done
  echo "segments retired: $(cat "$d"/worker-*.log | grep -c 'retired')"
}

# The same kill with the lossless filters keycache and lz4: the new heads of the
# dead server's partitions lack the key lists the workers sent it, answer
# PSKV_EKEYMISS, get the keys, and the sums stay exact.
tags kill_server_keycache once
f_kill_server_keycache() {
  local d=$TDIR/c misses
  launch "$d" --servers 3 --workers 4 --scheduler-opt=--replicas=2 -- --app check --rounds 1500 \
    --filter keycache,lz4
  wait_joined "$d" 4
  sleep 0.$((3 + RANDOM % 5))
  kill -KILL "$(cat "$d/server-$((RANDOM % 3)).pid")"
  wait_ok "$d"
  misses=$(cat "$d"/worker-*.log | sed -n 's/.* \([0-9]*\) misses.*/\1/p' | awk '{s += $1} END {print s + 0}')
  echo "keycache misses answered: $misses"
}

# The kill with --wire fp16 (R = 2, 2 workers): pushes, the heads' forwards and the
# pull replies carry 2-byte values; the new heads of the dead server's partitions
# hold the pushes as forwarded fp16 copies converted to float, and every sum stays
# exact (60 rounds, slowed to 50 ms each, keep every sum within fp16's exact
# integers, 2048, so that the pull replies are exact too).
tags kill_server_fp16 once
f_kill_server_fp16() {
  local d=$TDIR/c
  launch "$d" --servers 3 --workers 2 --scheduler-opt=--replicas=2 -- --app check --rounds 60 \
    --slowdown 11 --wire fp16
  wait_joined "$d" 2
  sleep 0.$((3 + RANDOM % 5))
  kill -KILL "$(cat "$d/server-$((RANDOM % 3)).pid")"
  wait_ok "$d"
  grep -q "table 'check.dense' filters none wire fp16" "$d/worker-0.log" || fail "no fp16 traffic logged"
  grep -q 'failover: first push' "$d"/worker-*.log || fail "the kill did not hit the run (no failover)"
}

# The same kill under bounded delay (ssp:2, R = 2): pulls at the tails keep the
# bound (checked from the values every round) and the sums stay exact.
# Once (2026-11-29) an ssp:2 pull after the kill read dense key 704 = 82 where 522..752
# was due: that run's surviving server had gone deaf (ZeroMQ's I/O thread blocked on a
# monitor closed before it was stopped, net_monitor_stop), fixed since.
tags kill_server_ssp figure
f_kill_server_ssp() {
  local d=$TDIR/c t0
  launch "$d" --servers 3 --workers 4 --scheduler-opt=--replicas=2 -- --app check \
    --consistency ssp:2 --rounds 400
  wait_joined "$d" 4
  sleep 0.$((2 + RANDOM % 3))
  t0=$(now_ms)
  kill -KILL "$(cat "$d/server-$((RANDOM % 3)).pid")"
  wait_ok "$d"
  grep -q 'ssp:2: largest lead' "$d/launch.out" || fail "no ssp bound line"
  local f; f=$(failover_ms "$d" "$t0") || exit 1
  echo "failover_ms=$f"
}

# The same kill under bsp (R = 2): each clock's combined update goes down the
# chains and is acknowledged from the tails; the new head of a dead server's
# partitions closes the clocks it had not, acknowledges re-sent pushes already
# folded into a close it holds, and every pull at clock c still returns exactly
# the sums of the rounds before c.
tags kill_server_bsp figure
f_kill_server_bsp() {
  local d=$TDIR/c t0
  launch "$d" --servers 3 --workers 4 --scheduler-opt=--replicas=2 -- --app check \
    --consistency bsp --rounds 300
  wait_joined "$d" 4
  sleep 1.$((RANDOM % 10)) # the push stream runs about 5 s
  t0=$(now_ms)
  kill -KILL "$(cat "$d/server-$((RANDOM % 3)).pid")"
  wait_ok "$d"
  # the kill came while the job ran: the scheduler replaced the server before the end
  grep -q 'marked dead' "$d/scheduler.log" || fail "no server was replaced during the job"
  [ "$(grep -n 'marked dead' "$d/scheduler.log" | head -n 1 | cut -d: -f1)" -lt \
    "$(grep -n 'every worker is done' "$d/scheduler.log" | head -n 1 | cut -d: -f1)" ] ||
    fail "the server was replaced only after the job"
  # a failover time only when pushes were in flight to the dead server: under bsp
  # the workers often wait in a pull at that moment, every push acknowledged
  if grep -q 'failover: first push' "$d"/worker-*.log; then
    local f; f=$(failover_ms "$d" "$t0") || exit 1
    echo "failover_ms=$f"
  fi
}

# R = 3 on 5 servers: kill the head, then a middle, then the tail of a chain, one
# at a time; after each of the first two every chain has 3 members again.
tags chain_r3 figure
f_chain_r3() {
  local d=$TDIR/c js chain pid i k
  # shellcheck disable=SC2086 # CHECK_ARGS: several words
  launch "$d" --servers 5 --workers 3 --scheduler-opt=--replicas=3 -- --app check ${CHECK_ARGS:---rounds 2000}
  wait_joined "$d" 3
  js=$(status_json "$d") || fail "no status"
  chain=$(grep -o '"chains":\[\[[0-9,]*\]' <<< "$js" | grep -o '[0-9,]*\]$' | tr -d ']')
  IFS=, read -r -a members <<< "$chain"
  [ "${#members[@]}" -eq 3 ] || fail "chain of partition 0 is '$chain'"
  for k in 0 1 2; do # head of the original chain, then its middle, then its tail
    local id=${members[$k]} srv=""
    for i in 0 1 2 3 4; do
      grep -q "registered as node $id;" "$d/server-$i.log" 2>/dev/null && srv=$i
    done
    [ -n "$srv" ] || fail "no server log for node $id"
    sleep 0.4
    kill -KILL "$(cat "$d/server-$srv.pid")"
    # the scheduler replaces it within the death time-out
    for i in $(seq 50); do
      js=$(status_json "$d") && grep -q "\"id\":$id,[^}]*\"state\":\"dead\"" <<< "$js" && break
      sleep 0.1
    done
    grep -q "\"id\":$id,[^}]*\"state\":\"dead\"" <<< "$js" || fail "node $id not declared dead"
    if [ $k -lt 2 ]; then
      if grep -o '"chains":\[.*\]' <<< "$js" | grep -q '\[[0-9]*,0\|,0\]\|\[0'; then
        fail "after killing node $id some chain has fewer than 3 servers"
      fi
      grep -q "\[[0-9,]*\b$id\b[0-9,]*\]" <<< "$(grep -o '"chains":.*' <<< "$js")" &&
        fail "node $id still in a chain after it died"
    fi
  done
  wait_ok "$d"
  grep -q '"lost":0' <<< "$js" || fail "partitions lost: $js"
  # a forwarded clock passed on down every chain of its head bounced between two
  # middles for ever ([H, B, C] and [H, C, B]): tens of thousands of these lines, full
  # send queues, copies to new members lost
  local bounced; bounced=$(cat "$d"/server-*.log | grep -c 'cannot forward a clock')
  [ "$bounced" -lt 2000 ] || fail "forwarded clocks bounced between servers ($bounced 'cannot forward a clock')"
  echo "killed nodes ${members[*]} (head, middle, tail of partition 0's chain) one at a time"
}

# The same three kills under bsp: each close reaches the tails past a dead head,
# middle or tail, and every pull at clock c equals the sums of the rounds before c.
tags chain_r3_bsp figure
f_chain_r3_bsp() { CHECK_ARGS="--consistency bsp --rounds 600" f_chain_r3; }

# A worker that hears of a failover late must not let a new head close a bsp clock
# before it has re-sent what it had sent to the dead server (bsp, R = 2). Every
# worker sends CLOCK 4 to the server with the smallest node id, S, and to the
# others 8 s later (PSKV_TEST_CLOCK_GAP): S closes clock 4, the others hold it open.
# Another server is killed in that gap (declared dead at once: its connection
# closed), so its partitions stay open at clock 4 on
# their new heads, S among them, and the third server refuses the pushes it held
# for clock 4 (placement change). The workers read the new view only 2 s after it
# arrives (PSKV_TEST_VIEW_DELAY_MS): they hear the refusal first, re-send the
# refused parts and their clock, still on the old view, before re-sending the parts
# stranded on the dead server to S. Counted there, that clock closed clock 4 on the
# dead server's partitions without them, and their re-sends were dropped as late:
# the pull at clock 5 failed the exact sums. Fails so every time on f15e6e0.
# It also caught a second bug, now and then (1 run in many): a dense-run pull the
# workers planned on the old view, sent to S, counted as many rows as S tails on the
# new view, but other ones, and was answered; "key 141 = 150, expected 190" was
# another key's exact sum. A run planned before the placement changed is now stale
# (chain_rows; unit test chain/dense_run_old_view, which the count alone fails).
tags bsp_late_view once
f_bsp_late_view() {
  local d=$TDIR/c first="" i victim=""
  PSKV_TEST_CLOCK_GAP=4:$((8000 * TS)) PSKV_TEST_VIEW_DELAY_MS=$((2000 * TS)) \
    launch "$d" --servers 3 --workers 4 --scheduler-opt=--replicas=2 \
    -- --app check --consistency bsp --rounds 12
  wait_joined "$d" 4
  for i in $(seq $((600 * TS))); do
    [ "$(cat "$d"/worker-*.log | grep -c 'test hook: CLOCK 4 went to server node')" -ge 4 ] && break
    sleep 0.05
  done
  first=$(sed -n 's/.*test hook: CLOCK 4 went to server node \([0-9]*\) only.*/\1/p' \
    "$d"/worker-*.log | sort -u)
  [ "$(grep -c 'test hook: CLOCK 4 went' "$d"/worker-*.log | awk -F: '{s += $2} END {print s}')" -eq 4 ] ||
    fail "not every worker reached the clock gap within 30 s"
  [ "$(wc -w <<< "$first")" -eq 1 ] || fail "the workers' clock gaps began at servers '$first', not one"
  for i in 0 1 2; do
    grep -q "registered as node $first;" "$d/server-$i.log" || victim=$i
  done
  kill -KILL "$(cat "$d/server-$victim.pid")"
  wait_ok "$d"
  # the scenario happened: the view that replaced the server came inside the gap
  local gap0 view
  gap0=$(stamp_ms "$(grep -h 'test hook: CLOCK 4 went' "$d"/worker-*.log | sort | head -n 1)")
  view=$(stamp_ms "$(grep -m 1 'server node [0-9]* replaced' "$d/scheduler.log")")
  [ -n "$view" ] || fail "no server was replaced during the job"
  [ $((view - gap0)) -lt $((8000 * TS)) ] ||
    fail "the view came $((view - gap0)) ms after the clock gap began, after its end: scenario not reached"
  grep -h ' [1-9][0-9]* dropped as late' "$d"/server-*.log && fail "a server dropped pushes as late"
  echo "killed server-$victim in the clock gap; clock 4 first went to node $first"
}
