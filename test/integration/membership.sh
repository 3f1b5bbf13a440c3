# Membership (sourced by integration.sh): registration rules, heartbeats and
# liveness, a replaced node forgotten.

t_registration_rules() {
  local port rc
  port=$(free_port)
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 2 --job-id 4242
  start worker-a "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --rank 0 --app check
  sleep 0.5
  # a rank taken twice is refused
  "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --rank 0 --app check --connect-timeout 5 > dup.log 2>&1
  rc=$?
  [ $rc -ne 0 ] || fail "duplicate rank accepted"
  grep -q 'rank 0 is taken' dup.log || fail "no reason for the refusal: $(cat dup.log)"
  # another job id is refused
  "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --job-id 999 --app check --connect-timeout 5 > job.log 2>&1 &&
    fail "foreign job id accepted"
  grep -q 'job id 999' job.log || fail "no reason for the job refusal: $(cat job.log)"
  # status works while the scheduler waits
  "$BIN/pskvctl" --scheduler "127.0.0.1:$port" status > status.txt || fail "status failed while waiting"
  grep -q 'state waiting' status.txt || fail "status does not say waiting: $(cat status.txt)"
  grep -q 'worker' status.txt || fail "status does not list the worker"
  kill "$(cat worker-a.pid)" "$(cat scheduler.pid)"
  wait_exit "$(cat scheduler.pid)" 10 >/dev/null
}

tags heartbeat_liveness serial
t_heartbeat_liveness() {
  local port js
  port=$(free_port)
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 1 --dead-after-ms 400
  start server-0 "$BIN/pskv-server" --scheduler "127.0.0.1:$port"
  wait_servers "$port" 1 > /dev/null || fail "server did not register"
  sleep 0.5
  js=$("$BIN/pskvctl" --scheduler "127.0.0.1:$port" status --json)
  grep -q '"alive":true' <<< "$js" || fail "live server not shown alive: $js"
  kill -STOP "$(cat server-0.pid)"
  sleep 1.2
  js=$("$BIN/pskvctl" --scheduler "127.0.0.1:$port" status --json)
  kill -CONT "$(cat server-0.pid)"
  grep -q '"alive":false' <<< "$js" || fail "paused server not shown dead: $js"
  sleep 0.8
  js=$("$BIN/pskvctl" --scheduler "127.0.0.1:$port" status --json)
  grep -q '"alive":true' <<< "$js" || fail "resumed server not shown alive: $js"
  kill "$(cat server-0.pid)" "$(cat scheduler.pid)"
}

# A replaced server is forgotten 30 s after it left (MEMB_FORGET_MS; 6 s here through
# the test hook PSKV_TEST_FORGET_MS): gone from status (counted as forgotten) and,
# at the next view, from the workers' slots; one that comes back after that
# (stopped, then resumed) learns it is out and exits 3.
t_forget_replaced() {
  local port js i pid0 pid1 f
  port=$(free_port)
  PSKV_TEST_FORGET_MS=6000 start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 3 --workers 2 --replicas 2
  for i in 0 1 2; do start "server-$i" "$BIN/pskv-server" --scheduler "127.0.0.1:$port"; done
  for i in 0 1; do
    start "worker-$i" "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --rank "$i" --app check \
      --consistency async --count-acked --rounds 1000000 --slowdown 1.4 --stop-file "$TDIR/stop"
  done
  wait_line worker-0.log 'joined job' 1 30 && wait_line worker-1.log 'joined job' 1 30 ||
    fail "the workers did not join"
  pid0=$(cat server-0.pid) pid1=$(cat server-1.pid)
  kill -KILL "$pid0"
  wait_line scheduler.log 'replaced: view epoch' 1 10 || fail "server 0 not replaced"
  # the survivors hold their new partitions whole before the second loss (else a
  # partition whose copy was still on its way from server 1 is lost, rightly)
  for i in 1 2; do
    wait_line "server-$i.log" 'every partition held here is whole' 1 30 ||
      fail "server $i did not get its copies: $(tail -n 1 "server-$i.log")"
  done
  kill -STOP "$pid1"
  wait_line scheduler.log 'replaced: view epoch' 2 10 || fail "stopped server 1 not replaced"
  js=$("$BIN/pskvctl" --scheduler "127.0.0.1:$port" status --json)
  grep -q "\"pid\":$pid1,\"state\":\"dead\"" <<< "$js" || fail "replaced server not shown dead: $js"
  wait_line scheduler.log 'forgetting server node' 2 45 || fail "replaced servers not forgotten"
  js=$("$BIN/pskvctl" --scheduler "127.0.0.1:$port" status --json)
  grep -q '"forgotten":2' <<< "$js" || fail "status does not count 2 forgotten: $js"
  grep -q "\"pid\":\\($pid0\\|$pid1\\)," <<< "$js" && fail "forgotten servers still listed: $js"
  start server-3 "$BIN/pskv-server" --scheduler "127.0.0.1:$port" # a join: a new view
  wait_line scheduler.log 'joined the running job' 1 20 || fail "server 3 did not join"
  for i in 0 1; do
    wait_line "worker-$i.log" 'takes the slot of server node' 1 10 ||
      fail "worker $i did not reuse a forgotten server's slot"
  done
  kill -CONT "$pid1"
  wait_exit "$pid1" 10; f=$?
  [ $f -eq 3 ] || fail "resumed forgotten server exited $f, not 3"
  grep -q 'declared this server dead' server-1.log || fail "server 1 did not say why it exits"
  touch "$TDIR/stop"
  for i in 0 1; do
    wait_exit "$(cat "worker-$i.pid")" 60 || fail "worker $i exited $?: $(tail -n 1 "worker-$i.log")"
    grep -q '^check ok:' "worker-$i.log" || fail "worker $i: $(tail -n 1 "worker-$i.log")"
  done
  wait_exit "$(cat scheduler.pid)" 20 || fail "scheduler exited $?"
}
