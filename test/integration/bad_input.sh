# Bad input (sourced by integration.sh): malformed messages at running daemons, an
# unreachable scheduler, wrong flags, the fuzz corpus and the launcher's time-out.

t_malformed_input() {
  local port js sp0 sp1
  port=$(free_port)
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 2 --workers 3
  start server-0 "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --max-message 65536
  start server-1 "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --max-message 65536
  js=$(wait_servers "$port" 2) || fail "servers did not register"
  sp0=$(grep -o '"role":"server","rank":0,"host":"[^"]*","port":[0-9]*' <<< "$js" | sed 's/.*"port"://')
  sp1=$(grep -o '"role":"server","rank":1,"host":"[^"]*","port":[0-9]*' <<< "$js" | sed 's/.*"port"://')
  [ -n "$sp0" ] && [ -n "$sp1" ] || fail "no server ports in status: $js"
  "$BIN/pskv-garbage" --endpoint "tcp://127.0.0.1:$sp0" --max-message 65536 > garbage-server.out 2>&1 ||
    { cat garbage-server.out; fail "server did not answer every malformed message with ERROR"; }
  "$BIN/pskv-garbage" --endpoint "tcp://127.0.0.1:$port" > garbage-scheduler.out 2>&1 ||
    { cat garbage-scheduler.out; fail "scheduler did not answer every malformed message with ERROR"; }
  cat server-0.log server-1.log | grep -q 'refused' || fail "no server logged a refused message"
  grep -q 'dropped message from\|refused' scheduler.log || fail "scheduler logged nothing"
  kill -0 "$(cat server-0.pid)" && kill -0 "$(cat scheduler.pid)" || fail "a daemon died of garbage"
  # the same daemons then run the check
  for r in 0 1 2; do
    start "worker-$r" "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --rank $r --app check
  done
  for r in 0 1 2; do
    wait_exit "$(cat worker-$r.pid)" 120 || fail "worker $r exited $?: $(tail -n 3 worker-$r.log)"
    grep -q '^check ok:' "worker-$r.log" || fail "worker $r: $(tail -n 1 worker-$r.log)"
  done
  for d in scheduler server-0 server-1; do
    wait_exit "$(cat $d.pid)" 20 || fail "$d exited $?"
  done
}

t_malformed_while_serving() {
  # Requests of this very job that are wrong in depth (unknown table, keys out of
  # range, counts that do not match) while a worker is busy: each is answered
  # with an ERROR and the worker's own traffic goes on unharmed.
  local port js sp job
  port=$(free_port)
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 1
  start server-0 "$BIN/pskv-server" --scheduler "127.0.0.1:$port"
  js=$(wait_servers "$port" 1) || fail "server did not register"
  sp=$(grep -o '"role":"server","rank":0,"host":"[^"]*","port":[0-9]*' <<< "$js" | sed 's/.*"port"://')
  job=$(sed 's/.*"job_id":"\([0-9]*\)".*/\1/' <<< "$js")
  start worker-0 "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --rank 0 --app bench \
    --size 4096 --mode serial --runs 1000 --steps 200
  for i in $(seq 100); do grep -q '^bench run=' worker-0.log && break; sleep 0.1; done
  grep -q '^bench run=' worker-0.log || fail "bench did not start: $(tail -n 3 worker-0.log)"
  "$BIN/pskv-garbage" --endpoint "tcp://127.0.0.1:$sp" --job-id "$job" --table bench.4096 \
    --width 256 > garbage.out 2>&1 || { cat garbage.out; fail "not every malformed request was answered"; }
  grep -q 'outside table' server-0.log || fail "no out-of-range refusal logged"
  grep -q 'unknown table' server-0.log || fail "no unknown-table refusal logged"
  grep -q "table 'bench.4096': lr nan refused: it must be a finite number > 0" server-0.log ||
    fail "no refusal of TABLE_LR's NaN logged"
  grep -q "TABLE_LR without table_lr" server-0.log || fail "no refusal of a TABLE_LR without lr"
  local before after
  before=$(grep -c '^bench run=' worker-0.log)
  sleep 1
  after=$(grep -c '^bench run=' worker-0.log)
  [ "$after" -gt "$before" ] || fail "the worker stopped making progress ($before -> $after runs)"
  kill -0 "$(cat worker-0.pid)" || fail "the worker died: $(tail -n 3 worker-0.log)"
  # before the SIGTERM below, which may interrupt a step's send (EINTR) on the way out
  grep -q 'step failed' worker-0.log && fail "a worker step failed: $(grep 'step failed' worker-0.log)"
  kill "$(cat worker-0.pid)" "$(cat server-0.pid)" "$(cat scheduler.pid)"
  return 0
}

tags unreachable_scheduler serial
t_unreachable_scheduler() {
  local port start_s rc
  port=$(free_port)
  start_s=$SECONDS
  "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --connect-timeout 2 --app check > worker.log 2>&1
  rc=$?
  [ $rc -ne 0 ] || fail "worker exited 0 without a scheduler"
  [ $((SECONDS - start_s)) -le 15 ] || fail "worker took $((SECONDS - start_s)) s to give up"
  grep -q "unreachable" worker.log || fail "no clear error: $(cat worker.log)"
  "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --connect-timeout 2 > server.log 2>&1 &&
    fail "server exited 0 without a scheduler"
  grep -q "unreachable" server.log || fail "server: no clear error: $(cat server.log)"
}

t_wrong_flags() {
  local b rc
  for b in pskv-scheduler pskv-server pskv-worker pskvctl; do
    "$BIN/$b" --no-such-flag > out 2>&1; rc=$?
    [ $rc -eq 2 ] || fail "$b --no-such-flag exited $rc, expected 2"
    grep -q "unknown flag '--no-such-flag'" out || fail "$b: no usage message: $(cat out)"
    "$BIN/$b" --help > help 2>&1 || fail "$b --help failed"
    grep -q 'default' help || fail "$b --help lists no defaults"
  done
  "$BIN/pskv-scheduler" --servers abc > out 2>&1; [ $? -eq 2 ] || fail "--servers abc accepted"
  "$BIN/pskv-scheduler" --servers=0 > out 2>&1; [ $? -eq 2 ] || fail "--servers=0 accepted"
  grep -q 'servers' out || fail "bound error does not name the flag"
  PSKV_SCHEDULER_SERVERS=x "$BIN/pskv-scheduler" > out 2>&1; [ $? -eq 2 ] || fail "bad env accepted"
  grep -q PSKV_SCHEDULER_SERVERS out || fail "env error does not name the variable"
  "$BIN/pskv-worker" --app nosuch > out 2>&1; [ $? -eq 2 ] || fail "--app nosuch accepted"
  "$BIN/pskv-worker" --app mlp --lr-schedule steps > out 2>&1; [ $? -eq 2 ] || fail "--lr-schedule steps accepted"
  grep -q 'lr-schedule' out || fail "the schedule error does not name the flag"
  "$BIN/pskv-worker" --app check --push lent > out 2>&1; [ $? -eq 2 ] || fail "--push lent accepted"
  grep -q -- '--push' out || fail "the push error does not name the flag"
  "$BIN/pskv-worker" --app bench --mode burst > out 2>&1; [ $? -eq 2 ] || fail "--mode burst accepted"
  "$BIN/pskv-server" --socket-buffer -1 > out 2>&1; [ $? -eq 2 ] || fail "--socket-buffer -1 accepted"
  "$LAUNCH" --servers 0 --workers 1 > out 2>&1; [ $? -eq 2 ] || fail "launch-local --servers 0 accepted"
}

t_fuzz_corpus() {
  "$BIN/pskv-fuzz-replay" "$top/test/corpus" || fail "corpus replay failed"
}

tags launch_timeout serial
t_launch_timeout() {
  local rc start_s
  start_s=$SECONDS
  # 2 workers expected, the cluster never completes: the launcher's time-out ends it
  "$LAUNCH" --servers 1 --workers 1 --timeout 3 --log-dir "$TDIR/logs" \
    --scheduler-opt --workers --scheduler-opt 2 -- --app check > out 2>&1
  rc=$?
  [ $rc -eq 124 ] || fail "launch-local exited $rc on time-out, expected 124"
  no_strays "$TDIR/logs"
}
