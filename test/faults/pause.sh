# Fault tests (sourced by faults.sh): a server paused (SIGSTOP) until it is replaced,
# with shared memory, push buffers and no-copy pushes.

# pause_until_replaced DIR: once the job's 3 workers joined, server 1 is stopped
# (SIGSTOP) until declared dead and resumed (SIGCONT); it must learn it was
# replaced, say so, and exit within 5 s.
pause_until_replaced() {
  local d=$1 pid i
  wait_joined "$d" 3
  sleep 0.3
  pid=$(cat "$d/server-1.pid")
  kill -STOP "$pid"
  sleep 1.2 # and on until declared dead (the time-out adapts: up to --dead-after-ms 5 s)
  for i in $(seq 80); do grep -q 'marked dead' "$d/scheduler.log" && break; sleep 0.1; done
  kill -CONT "$pid"
  for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && fail "the paused server still runs after it was replaced"
  grep -q 'declared this server dead' "$d/server-1.log" || fail "the paused server did not say it was replaced"
  return 0
}

# SIGSTOP a server past the death time-out, then SIGCONT: it learns it was
# replaced, serves nothing, and exits 3; the job's sums stay exact.
tags pause_server serial
f_pause_server() {
  local d=$TDIR/c
  launch "$d" --servers 3 --workers 3 --scheduler-opt=--replicas=2 -- --app check --rounds 1500
  pause_until_replaced "$d"
  wait_ok "$d"
  grep -q 'server-1 (pid [0-9]*) exited with status 3' "$d/launch.out" ||
    fail "the paused server did not exit 3: $(grep server-1 "$d/launch.out")"
}

# The same pause with --shm: the paused server, replaced while it sleeps, wakes up a
# zombie with pulls to answer into its workers' segments; the workers retired those
# segments when the view replaced it, so its late writes land in memory nobody reads
# again, and every sum stays exact.
tags pause_server_shm shm once
f_pause_server_shm() {
  local d=$TDIR/c
  launch "$d" --servers 3 --workers 3 --scheduler-opt=--replicas=2 -- --app check --rounds 180 \
    --check-keys 40000 --shm
  pause_until_replaced "$d"
  wait_ok "$d"
  grep -q 'no shared memory' "$d"/worker-*.log && fail "a server refused shared memory"
  return 0
}

# DIR's lone server, once its 2 workers joined, paused 2.5 s; the job must end well,
# having asked a part again.
pause_lone() {
  local s
  wait_joined "$1" 2
  sleep 0.3
  s=$(cat "$1/server-0.pid")
  kill -STOP "$s"
  sleep 2.5
  kill -CONT "$s"
  wait_ok "$1"
  grep -q 'asking again' "$1"/worker-*.log || fail "no part went again: the pause came too late"
}

# pause_lone, and a segment retired after the pause (--shm).
pause_lone_server() {
  pause_lone "$1"
  grep -q 'segment .* retired' "$1"/worker-*.log || fail "no segment retired after the pause"
}

# A lone server paused (SIGSTOP) for 2.5 s, the scheduler waiting 8 s before a death:
# the workers push from push buffers the server reads in place (pskv_push_buffer,
# --push buffer) and read views in place (--pull view). Parts unanswered for 1 s go
# again: each one's segment is retired (the server may still read it) and its values
# copied from the buffer, which its request keeps until the end; the woken server
# reads the old regions, unchanged, and drops the copies it already applied. Every
# sum stays exact.
tags pause_server_buffers shm once
f_pause_server_buffers() {
  local d=$TDIR/c
  launch "$d" --servers 1 --workers 2 -- --app check \
    --rounds 600 --check-keys 40000 --shm --push buffer --pull view --log-level info
  pause_lone_server "$d"
  grep -q 'push buffers: 600 sent, [1-9][0-9]* sends read by the server in place' \
    "$d/worker-0.log" || fail "worker 0: $(grep 'push buffers' "$d/worker-0.log")"
  return 0
}

# The same pause under pskv_pushpull through shared memory (check --pull pushpull,
# worker 1 into views, --pull pushpull-view): a combined call unanswered for 1 s goes
# again as a new part, with a new region into which its gradient is copied again (the
# old one retired: the woken server applies the first send, writes its values there
# and drops the second send's push as a duplicate, answering it with the values).
# Every sum stays exact; views before and after the pause are read in place.
# The same pause over TCP: a combined call unanswered for 1 s goes again with the same
# request id; the woken server applies the first send, records its id once its reply
# went to ZeroMQ (serve.c:on_push), then finds the second send's push recorded and
# answers it with the values without applying it again. Every sum stays exact, worker
# 1's through views read in the received frames.
tags pause_server_pushpull once
f_pause_server_pushpull() {
  local d=$TDIR/c w
  launch "$d" --servers 1 --workers 2 --worker-opt 1:--pull --worker-opt 1:pushpull-view \
    -- --app check --rounds 600 --check-keys 40000 --pull pushpull --log-level info
  pause_lone "$d"
  for w in 0 1; do
    grep -q '^check ok:.*exact' "$d/worker-$w.log" || fail "worker $w: $(tail -n 1 "$d/worker-$w.log")"
  done
  return 0
}

tags pause_server_pushpull_shm shm once
f_pause_server_pushpull_shm() {
  local d=$TDIR/c
  launch "$d" --servers 1 --workers 2 --worker-opt 1:--pull --worker-opt 1:pushpull-view \
    -- --app check --rounds 600 --check-keys 40000 --shm --pull pushpull --log-level info
  pause_lone_server "$d"
  grep -q '^check ok:.*exact' "$d/worker-1.log" || fail "worker 1: $(tail -n 1 "$d/worker-1.log")"
  grep -q 'view pulls: [1-9][0-9]* read in place in shared memory' "$d/worker-1.log" ||
    fail "worker 1: $(grep 'view pulls' "$d/worker-1.log")"
  return 0
}

# The same pause under a stream of 16 MiB pushes sent without a copy
# (pskv_push_nocopy, bench app --mode stream: 16 in flight; 64 KiB socket buffers
# on the servers). When the pause catches pushes still on their way to the paused
# server, a push answered by the new owner must not end while ZeroMQ holds its
# values for the dead server: the worker closes that connection when the view
# says the server died (or, had it not yet, resets it), dropping what was queued
# there (logged). Every run must finish; whether a pause catches pushes on their
# way depends on timing (the server reads ahead of its work), so up to 5 runs are
# made until one has needed the close or the reset.
tags pause_server_nocopy serial
f_pause_server_nocopy() {
  local d pid i attempt
  for attempt in 1 2 3 4 5; do
    d=$TDIR/c$attempt
    launch "$d" --servers 2 --workers 1 --scheduler-opt=--replicas=2 \
      --server-opt=--socket-buffer=65536 -- --app bench --size 16777216 --mode stream \
      --runs 1 --warmup 0 --steps 250 --push nocopy
    wait_joined "$d" 1
    sleep "$TS" # the table open and the first pushes
    pid=$(cat "$d/server-1.pid")
    kill -STOP "$pid"
    # resumed once the run has ended: resumed earlier, it could read the held
    # values itself before the pushes that lent them end
    for i in $(seq $((300 * TS))); do grep -q '^bench size=' "$d/worker-0.log" && break; sleep 0.1; done
    kill -CONT "$pid"
    wait "$(cat "$d/launch.pid")" || fail "run $attempt failed: $(tail -n 3 "$d/worker-0.log")"
    grep -q "^bench size=16777216 mode=stream" "$d/worker-0.log" || fail "run $attempt: no bench figure"
    if grep -q 'resetting the connection to server\|closing the connection to server node .* it held the values' "$d/worker-0.log"; then
      echo "run $attempt closed or reset the connection holding its values"
      return 0
    fi
  done
  fail "in 5 runs the worker never closed or reset a connection still holding its values"
}
