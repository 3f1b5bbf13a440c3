# Fault tests of the combined push-and-pull (sourced by faults.sh): a server killed
# while every round's dense run goes through pskv_pushpull.

# Once the N workers of DIR joined, and a moment more (0.3-0.7 s), kill -9 one of its
# 3 servers at random; killed_ms: when.
kill_a_server() {
  wait_joined "$1" "$2"
  sleep 0.$((3 + RANDOM % 5))
  killed_ms=$(now_ms)
  kill -KILL "$(cat "$1/server-$((RANDOM % 3)).pid")"
}

# Kill -9 one of 3 servers (R = 2) while 4 workers end every round with pskv_pushpull
# (check --pull pushpull, async): re-sent parts are not applied twice (dedupe), their
# values come back, and every key equals the sum of the pushes. Workers 2 and 3 take
# the values through views (--pull pushpull-view, PSKV_PP_VIEW): a part sent again
# replaces the frame an earlier reply left (ASan: none leaks).
tags pushpull_kill_server once
f_pushpull_kill_server() {
  local d=$TDIR/c f
  launch "$d" --servers 3 --workers 4 --scheduler-opt=--replicas=2 \
    --worker-opt 2:--pull --worker-opt 2:pushpull-view --worker-opt 3:--pull \
    --worker-opt 3:pushpull-view -- --app check --rounds 1500 --pull pushpull
  kill_a_server "$d" 4
  wait_ok "$d"
  f=$(failover_ms "$d" "$killed_ms") || exit 1
  echo "failover_ms=$f"
  grep -q 'NaN pushpull: refused naming the table' "$d"/worker-0.log || fail "worker 0 ran no pushpull check"
  grep -q 'NaN pushpull: refused naming the table' "$d"/worker-2.log || fail "worker 2 ran no pushpull check"
}

# The same with the clock riding on a plain push (check --push buffer-clock: each
# round's dense run pushed last from a push buffer with pskv_push_buffer_send_clock,
# the trainer's --prefetch step; ssp:2, so that a clock lost with the dead server
# would stall the run): re-sent parts are applied once, the clock goes again as
# CLOCK after them (wview_catch_up), and every key equals the sum of the pushes.
tags push_clock_kill_server once
f_push_clock_kill_server() {
  local d=$TDIR/c
  launch "$d" --servers 3 --workers 3 --scheduler-opt=--replicas=2 \
    -- --app check --rounds 400 --push buffer-clock --consistency ssp:2
  kill_a_server "$d" 3
  wait_ok "$d"
  f=$(failover_ms "$d" "$killed_ms") || exit 1
  echo "failover_ms=$f"
}

# The same with --shm (3 workers, the run of 40000 keys in parts of 64 KiB and more
# through shared memory both ways): a part sent again to a new owner takes a new
# region and copies the gradient into it again (the old region holds the values
# of the dead server's reply, or of none); its push is applied once (dedupe) and
# the final sums exact. Workers 1 and 2 read views there (a part sent again
# replaces the region an earlier reply left: ASan, none leaks). Then one partition
# (R = 2), so that one head answers each whole run and worker 1's views are read in
# place in the region, and that head killed (the server that mapped segments): the
# call in flight goes again to the new head, its view copied from the parts' replies,
# and the views before and after it stay in place.
tags pushpull_kill_server_shm once
f_pushpull_kill_server_shm() {
  local d=$TDIR/c h
  launch "$d" --servers 3 --workers 3 --scheduler-opt=--replicas=2 \
    --worker-opt 1:--pull --worker-opt 1:pushpull-view --worker-opt 2:--pull \
    --worker-opt 2:pushpull-view -- --app check --rounds 400 --pull pushpull \
    --check-keys 40000 --shm
  kill_a_server "$d" 3
  wait_ok "$d"
  grep -q '^check ok:.*exact' "$d"/worker-1.log || fail "worker 1: $(tail -n 1 "$d"/worker-1.log)"
  grep -q 'no shared memory' "$d"/worker-*.log && fail "a server refused shared memory"
  d=$TDIR/head
  launch "$d" --servers 3 --workers 2 --scheduler-opt=--replicas=2 --scheduler-opt=--partitions=1 \
    --server-opt --log-level --server-opt info --worker-opt 1:--pull --worker-opt 1:pushpull-view \
    -- --app check --rounds 300 --pull pushpull --check-keys 40000 --shm --log-level info
  wait_joined "$d" 2
  sleep 0.$((3 + RANDOM % 5))
  h=$(grep -l 'mapped shared-memory segment' "$d"/server-*.log | head -n 1)
  [ -n "$h" ] || fail "no server mapped a segment"
  kill -KILL "$(cat "${h%.log}.pid")"
  wait_ok "$d"
  grep -q '^check ok:.*exact' "$d"/worker-1.log || fail "head killed, worker 1: $(tail -n 1 "$d"/worker-1.log)"
  grep -q 'view pulls: [1-9][0-9]* read in place in shared memory' "$d"/worker-1.log ||
    fail "head killed: $(grep 'view pulls' "$d"/worker-1.log)"
  return 0
}

# The same under ssp:1 with 4 workers: every round's pull is served by the rows'
# head, which waits on the clocks it counted itself (the clock riding on the
# combined call, ends_clock), not on those forwarded by the other heads; after the
# kill each worker's clock goes again once its re-sent parts' pushes are
# acknowledged (their pulls may wait on that very clock). Each round's values are
# checked against the bound, and the final sums exact.
tags pushpull_kill_server_ssp once
f_pushpull_kill_server_ssp() {
  local d=$TDIR/c
  launch "$d" --servers 3 --workers 4 --scheduler-opt=--replicas=2 \
    --worker-opt 2:--pull --worker-opt 2:pushpull-view -- --app check --rounds 500 \
    --pull pushpull --consistency ssp:1
  kill_a_server "$d" 4
  wait_ok "$d"
  grep -q '^check ok:.*ssp:1.*exact' "$d"/worker-0.log || fail "worker 0: $(tail -n 1 "$d"/worker-0.log)"
}

# The same kill under bsp (R = 2): a server that closed a clock as head, with a
# worker's pushpull part folded in, refuses the part's pull parked at the
# placement change (its other rows' closes came from the dead head); the worker
# sends the whole part again, and the server acknowledges the re-sent push as
# folded into its own close (it records the pushes it folds, as replicas do)
# instead of dropping it as late ("late (clock N had closed)", a third of the runs
# before 2026-11-30). The final sums are exact: applied once.
tags pushpull_kill_server_bsp once
f_pushpull_kill_server_bsp() {
  local d=$TDIR/c
  launch "$d" --servers 3 --workers 4 --scheduler-opt=--replicas=2 \
    --worker-opt 2:--pull --worker-opt 2:pushpull-view --worker-opt 3:--pull \
    --worker-opt 3:pushpull-view -- --app check --rounds 300 --pull pushpull --consistency bsp
  kill_a_server "$d" 4
  wait_ok "$d"
  grep -q '^check ok:.*bsp.*exact' "$d"/worker-0.log || fail "worker 0: $(tail -n 1 "$d"/worker-0.log)"
  grep -h ' [1-9][0-9]* dropped as late' "$d"/server-*.log && fail "a server dropped pushes as late"
  return 0
}
