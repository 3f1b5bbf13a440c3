# shellcheck shell=bash
# The shared-memory reply's fallback (sourced by integration.sh): a held
# pskv_pushpull whose segment the worker retired before the answer.

# pushpull_shm_fallback: pskv-shm-fallback (test/examples/shm_fallback.c) on a job of
# one server: rank 0's (--shm) pushpull of a bsp clock is held for rank 1 while its
# segment is retired (the push before it timed out) and replaced by the next
# segment, which the server maps in place of it; the server answers the pushpull
# with a values frame (server/consist/consist.c answer_pull_shm: its push applied,
# so not refused as stale) and both ranks read exactly 1 + 10 + 2 + 20 = 33 in every
# key. The logs show the retirement and the second segment mapped.
t_pushpull_shm_fallback() {
  local port rc0 rc1
  port=$(free_port)
  start sched "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 2
  start server "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --log-level info
  start w0 env PSKV_LOG_LEVEL=info "$BIN/pskv-shm-fallback" --scheduler "127.0.0.1:$port" \
    --rank 0 --go "$TDIR/go"
  start w1 "$BIN/pskv-shm-fallback" --scheduler "127.0.0.1:$port" --rank 1 --go "$TDIR/go"
  wait_exit "$(cat "$TDIR/w0.pid")" 60 > /dev/null; rc0=$?
  wait_exit "$(cat "$TDIR/w1.pid")" 60 > /dev/null; rc1=$?
  [ "$rc0" -eq 0 ] || fail "rank 0 exited $rc0: $(grep shm-fallback "$TDIR/w0.log" | tail -n 2)"
  [ "$rc1" -eq 0 ] || fail "rank 1 exited $rc1: $(grep shm-fallback "$TDIR/w1.log" | tail -n 2)"
  grep -q '^shm-fallback ok: rank 0' "$TDIR/w0.log" || fail "rank 0: $(tail -n 1 "$TDIR/w0.log")"
  grep -q '^shm-fallback ok: rank 1' "$TDIR/w1.log" || fail "rank 1: $(tail -n 1 "$TDIR/w1.log")"
  grep -q 'retired: a server may still touch a region of it' "$TDIR/w0.log" ||
    fail "rank 0 did not retire its segment: $(grep -i segment "$TDIR/w0.log")"
  [ "$(grep -c 'mapped shared-memory segment' "$TDIR/server.log")" -ge 2 ] ||
    fail "the server did not map a second segment: $(grep -i segment "$TDIR/server.log")"
  wait_exit "$(cat "$TDIR/sched.pid")" 30 > /dev/null || fail "the job did not end"
  wait_exit "$(cat "$TDIR/server.pid")" 30 > /dev/null || fail "the server did not exit"
  no_strays "$TDIR"
}
