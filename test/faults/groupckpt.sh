# Fault tests (sourced by faults.sh): a checkpoint of a service's group while a
# server is killed.

# A service of 3 servers at R = 2 sharing one data directory; groups A (2 workers)
# and B (1) of resume-check end their 4 steps and wait. Three checkpoints of group A
# are taken, then a fourth is asked with server-2 killed (-9) at once: it completes
# (without server-2: every partition has a live copy) or fails with the reason,
# never hangs. The newest complete one is whole: A, stopped and started again with
# --resume, comes back from it with the digest it ended with, while B waits beside
# it; a checkpoint of B after the failover completes on the 2 servers left.
tags group_ckpt_kill_server once
f_group_ckpt_kill_server() {
  local port svc i r st da f
  port=$(free_port)
  svc=127.0.0.1:$port
  mkdir -p "$TDIR/sched" "$TDIR/data"
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 3 --replicas 2 --service \
    --data-dir "$TDIR/sched"
  for i in 0 1 2; do
    start "server-$i" "$BIN/pskv-server" --scheduler "$svc" --data-dir "$TDIR/data"
  done
  wait_line "$TDIR/scheduler.log" 'cluster complete' 1 $((60 * TS)) || fail "no service"
  for r in 0 1; do
    start "a0-$r" "$BIN/pskv-worker" --scheduler "$svc" --group A --group-size 2 --rank "$r" \
      --join-timeout 120 --app resume-check --rounds 4
  done
  start b0-0 "$BIN/pskv-worker" --scheduler "$svc" --group B --group-size 1 --join-timeout 120 \
    --app resume-check --rounds 4
  wait_line "$TDIR/a0-0.log" '^resume-check: after step 4 digest' 1 $((60 * TS)) ||
    fail "group A did not finish: $(tail -n 2 "$TDIR/a0-0.log")"
  da=$(sed -n 's/^resume-check: after step 4 digest \([0-9a-f]*\)$/\1/p' "$TDIR/a0-0.log")
  ckpt_a() { # ckpt_a I [GROUP]: pskvctl checkpoint --group GROUP (A; output ck-I.out), waited for
    "$BIN/pskvctl" --scheduler "$svc" checkpoint --group "${2:-A}" > "$TDIR/ck-$1.out" 2>&1 &
    echo $! > "$TDIR/ck-$1.pid"
    [ "$1" != 4 ] || kill -KILL "$(cat "$TDIR/server-2.pid")"
    wait_exit "$(cat "$TDIR/ck-$1.pid")" $((90 * TS))
    st=$?
    case $st in
      0) grep -q "^checkpoint [0-9]* of group ${2:-A} complete$" "$TDIR/ck-$1.out" || fail "checkpoint $1 said: $(cat "$TDIR/ck-$1.out")" ;;
      1) grep -q '^pskvctl: checkpoint failed: ' "$TDIR/ck-$1.out" || fail "checkpoint $1 failed without the reason: $(cat "$TDIR/ck-$1.out")" ;;
      *) fail "checkpoint $1: pskvctl exited $st: $(cat "$TDIR/ck-$1.out")" ;;
    esac
  }
  for i in 1 2 3 4; do ckpt_a "$i"; done
  echo "the checkpoint asked as server-2 was killed: $(cat "$TDIR/ck-4.out")"
  wait_line "$TDIR/scheduler.log" 'server node [0-9]* replaced' 1 $((30 * TS)) ||
    fail "server-2 was not declared dead"
  # A resumes from the newest complete checkpoint of it: the 4th when it completed
  for r in 0 1; do kill -TERM "$(cat "$TDIR/a0-$r.pid")" 2>/dev/null; done
  for r in 0 1; do wait_exit "$(cat "$TDIR/a0-$r.pid")" $((20 * TS)) > /dev/null; done
  wait_line "$TDIR/scheduler.log" 'group A ended' 1 $((20 * TS)) || fail "group A did not end"
  for r in 0 1; do
    start "a1-$r" "$BIN/pskv-worker" --scheduler "$svc" --group A --group-size 2 --rank "$r" \
      --join-timeout 120 --app resume-check --rounds 4 --resume
  done
  wait_line "$TDIR/a1-0.log" '^resume-check: resumed digest' 1 $((60 * TS)) ||
    fail "A did not resume: $(tail -n 2 "$TDIR/a1-0.log")"
  grep -q "^resume-check: resumed digest $da$" "$TDIR/a1-0.log" ||
    fail "A came back as $(grep 'resumed digest' "$TDIR/a1-0.log"), not $da"
  ckpt_a 5 B
  grep -q 'complete$' "$TDIR/ck-5.out" || fail "a checkpoint after the failover: $(cat "$TDIR/ck-5.out")"
  wait_line "$TDIR/a1-0.log" '^resume-check: after step 4 digest' 1 $((60 * TS)) ||
    fail "resumed A did not finish its step: $(tail -n 2 "$TDIR/a1-0.log")"
  for f in a1-0 a1-1 b0-0; do kill -TERM "$(cat "$TDIR/$f.pid")" 2>/dev/null; done
  for f in a1-0 a1-1 b0-0; do wait_exit "$(cat "$TDIR/$f.pid")" $((20 * TS)) > /dev/null; done
  "$BIN/pskvctl" --scheduler "$svc" shutdown > /dev/null 2>&1 || fail "shutdown"
  wait_exit "$(cat "$TDIR/scheduler.pid")" $((30 * TS)) > /dev/null || fail "the service did not end"
  for i in 0 1; do wait_exit "$(cat "$TDIR/server-$i.pid")" $((30 * TS)) > /dev/null; done
  return 0
}
