# Operations tests (sourced by integration.sh): what an operator meets around a
# job's life (a late node, the metrics endpoints). Each function runs in its own
# test directory ($TDIR) under run_test's time-out.

# ms_now: milliseconds on the monotonic-enough wall clock of date (for bounds of
# about a second; the daemons' own timers are on CLOCK_MONOTONIC).
ms_now() { echo $(( $(date +%s%N) / 1000000 )); }

# A node registering with a scheduler whose job is over is refused at once with
# "job J finished" and exits 1 within 1 s (the scheduler stays up for --linger).
t_late_registration() {
  local port js job t0 t1 rc role
  port=$(free_port)
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 1 --linger 30
  start server-0 "$BIN/pskv-server" --scheduler "127.0.0.1:$port"
  js=$(wait_servers "$port" 1) || fail "server did not register"
  job=$(sed 's/.*"job_id":"\([0-9]*\)".*/\1/' <<< "$js")
  [[ $job =~ ^[0-9]+$ ]] || fail "no job id in status: $js"
  "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --app check --rounds 1 > worker-0.log 2>&1 ||
    fail "the job's worker failed: $(tail -n 3 worker-0.log)"
  wait_line scheduler.log "job $job finished; lingering" 1 20 || fail "scheduler did not linger"
  js=$("$BIN/pskvctl" --scheduler "127.0.0.1:$port" status --json) || fail "no status while lingering"
  grep -q '"state":"finished"' <<< "$js" || fail "status does not say finished: $js"
  for role in worker server; do
    t0=$(ms_now)
    if [ $role = worker ]; then
      "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --app check > late-$role.log 2>&1
    else
      "$BIN/pskv-server" --scheduler "127.0.0.1:$port" > late-$role.log 2>&1
    fi
    rc=$?
    t1=$(ms_now)
    [ $rc -eq 1 ] || fail "late $role exited $rc, not 1: $(tail -n 3 late-$role.log)"
    grep -q "job $job finished" late-$role.log || fail "late $role not told: $(tail -n 3 late-$role.log)"
    [ $((t1 - t0)) -lt 1000 ] || fail "late $role took $((t1 - t0)) ms to be refused (limit 1000)"
    echo "late $role refused in $((t1 - t0)) ms"
  done
  kill -TERM "$(cat scheduler.pid)"
  wait_exit "$(cat scheduler.pid)" 10 || fail "lingering scheduler exited $? on SIGTERM"
  wait_exit "$(cat server-0.pid)" 10 || fail "server exited $?"
}
