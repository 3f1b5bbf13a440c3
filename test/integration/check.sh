# The exact-sum check (sourced by integration.sh): --app check on real servers, with
# and without a copy, through shared memory (--shm), under CURVE, and failing on purpose.

t_check_2x3() {
  # workers 0 and 2 push the dense run without a copy (the default), worker 1 with one
  "$LAUNCH" --servers 2 --workers 3 --timeout 120 --log-dir "$TDIR/logs" \
    --worker-opt 1:--push --worker-opt 1:copy -- --app check --rounds 4 ||
    fail "launch-local exited $?"
  for r in 0 1 2; do
    grep -q '^check ok:' "$TDIR/logs/worker-$r.log" || fail "worker $r: $(tail -n 1 "$TDIR/logs/worker-$r.log")"
    grep -q 'dense table .* exact' "$TDIR/logs/worker-$r.log" || fail "worker $r checked no dense sums"
    grep -q 'sparse table .* exact' "$TDIR/logs/worker-$r.log" || fail "worker $r checked no sparse sums"
  done
  grep -q 'job .* done' "$TDIR/logs/scheduler.log" || fail "scheduler did not end the job"
  grep -q 'stopped by the scheduler' "$TDIR/logs/server-0.log" || fail "server 0 was not stopped in order"
  no_strays "$TDIR/logs"
}

t_check_push_clock() {
  # --push buffer-clock: each round's dense run pushed last from a push buffer, the
  # worker's clock ending on it (pskv_push_buffer_send_clock, the trainer's --prefetch
  # step): exact sums under async, bsp and ssp:1 over 2 servers, and no CLOCK message
  # but the one the NaN check's pskv_clock sends (bsp: to each of 2 servers)
  local cons d r
  for cons in async bsp ssp:1; do
    d="$TDIR/${cons/:/}"
    "$LAUNCH" --servers 2 --workers 3 --timeout 120 --log-dir "$d" -- --app check \
      --rounds 6 --push buffer-clock --consistency "$cons" --log-level info > /dev/null 2>&1 ||
      fail "$cons: launch-local exited $?: $(tail -n 2 "$d/worker-0.log")"
    for r in 0 1 2; do
      grep -q '^check ok:.*exact' "$d/worker-$r.log" || fail "$cons worker $r: $(tail -n 1 "$d/worker-$r.log")"
      grep -q 'clock ends: [02] CLOCK messages sent, 12 rode on pushes' "$d/worker-$r.log" ||
        fail "$cons worker $r: $(grep 'clock ends' "$d/worker-$r.log")"
    done
  done
  "$LAUNCH" --servers 1 --workers 1 --timeout 60 --log-dir "$TDIR/bad" -- --app check \
    --push buffer-clock --pull pushpull > /dev/null 2>&1
  [ $? -ne 0 ] || fail "--push buffer-clock with --pull pushpull accepted"
}

tags check_shm shm
t_check_shm() {
  # the exact-sum check with --shm: parts of 64 KiB and more (40000 keys) travel through
  # shared memory, each server maps each worker's segment (once, unless a re-send on a
  # loaded machine retired one), and no segment is left
  # in /dev/shm when the workers are gone (worker 1 pushes with a copy; worker 2 reads
  # the dense table through pskv_pull_view and pushes it from pskv_push_buffer's: over
  # 2 servers, copied into the view's buffer and into the parts' regions)
  "$LAUNCH" --servers 2 --workers 3 --timeout 120 --log-dir "$TDIR/logs" \
    --server-opt --log-level --server-opt info --worker-opt 1:--push --worker-opt 1:copy \
    --worker-opt 2:--pull --worker-opt 2:view --worker-opt 2:--push --worker-opt 2:buffer \
    -- --app check --rounds 4 --check-keys 40000 --shm --log-level info ||
    fail "launch-local exited $?"
  grep -q 'push buffers: 4 sent, 0 sends read by the server in place' "$TDIR/logs/worker-2.log" ||
    fail "worker 2: $(grep 'push buffers' "$TDIR/logs/worker-2.log")"
  grep -q 'view pulls: 0 read in place in shared memory, [1-9][0-9]* copied' \
    "$TDIR/logs/worker-2.log" || fail "worker 2: no copied view ($(grep 'view pulls' "$TDIR/logs/worker-2.log"))"
  local r p
  for r in 0 1 2; do
    grep -q '^check ok:.*exact' "$TDIR/logs/worker-$r.log" || fail "worker $r: no exact check"
    p=$(cat "$TDIR/logs/worker-$r.pid")
    ls /dev/shm | grep -q "^pskv-[0-9]*-$p-" && fail "worker $r left a segment in /dev/shm"
  done
  for r in 0 1; do
    [ "$(grep -c 'mapped shared-memory segment' "$TDIR/logs/server-$r.log")" -ge 3 ] ||
      fail "server $r did not map one segment per worker"
  done
  grep -q 'no shared memory' "$TDIR"/logs/worker-*.log && fail "a server refused shared memory"
  no_strays "$TDIR/logs"
}

tags check_shm_keys keys shm
t_check_shm_keys() {
  # --shm under CURVE (--keys): the headers encrypted on TCP, the values through shared
  # memory between processes of one user; every sum exact. One server holds the whole
  # dense table, so the workers' views (--pull view, pskv_pull_view) are read in place,
  # where the server wrote them, a released view is gone (app_check.c), and the pushes
  # are read by the server from the push buffers they were written in (--push buffer)
  "$LAUNCH" --keys "$TDIR/keys" --servers 1 --workers 2 --timeout 120 --log-dir "$TDIR/logs" \
    --server-opt --log-level --server-opt info \
    -- --app check --rounds 4 --check-keys 40000 --shm --pull view --push buffer \
    --log-level info || fail "launch-local exited $?"
  local r
  for r in 0 1; do
    grep -q '^check ok:.*exact' "$TDIR/logs/worker-$r.log" || fail "worker $r: no exact check"
    grep -q 'push buffers: 4 sent, 4 sends read by the server in place' \
      "$TDIR/logs/worker-$r.log" || fail "worker $r: $(grep 'push buffers' "$TDIR/logs/worker-$r.log")"
    grep -q 'view pulls: [1-9][0-9]* read in place in shared memory, 0 copied' \
      "$TDIR/logs/worker-$r.log" || fail "worker $r: no view read in place ($(grep 'view pulls' "$TDIR/logs/worker-$r.log"))"
  done
  [ "$(grep -c 'mapped shared-memory segment' "$TDIR/logs/server-0.log")" -ge 2 ] ||
    fail "the server did not map one segment per worker"
}

tags check_shm_other_user shm root
t_check_shm_other_user() {
  # a server run as another user (nobody) cannot map the workers' 0600 segments: it
  # refuses shared memory (PSKV_ENOSHM), the workers send those values again over TCP,
  # and every sum stays exact
  [ "$(id -u)" -eq 0 ] || { echo "  (skipped: needs root to run a server as nobody)"; return 0; }
  local bin=$TDIR/bin b
  mkdir -p "$bin"
  for b in pskv-scheduler pskv-worker; do ln -s "$BIN/$b" "$bin/$b"; done
  printf '#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups %s "$@"\n' \
    "$BIN/pskv-server" > "$bin/pskv-server"
  chmod +x "$bin/pskv-server"
  "$LAUNCH" --bin-dir "$bin" --servers 2 --workers 2 --timeout 120 --log-dir "$TDIR/logs" \
    -- --app check --rounds 4 --check-keys 40000 --shm --log-level info ||
    fail "launch-local exited $?"
  for r in 0 1; do
    grep -q '^check ok:.*exact' "$TDIR/logs/worker-$r.log" || fail "worker $r: no exact check"
    grep -q 'no shared memory (.*cannot open segment.*); its values go over TCP' \
      "$TDIR/logs/worker-$r.log" || fail "worker $r did not fall back to TCP"
  done
  grep -q 'refused PUSH.*cannot open segment' "$TDIR"/logs/server-*.log ||
    fail "no server said why it refused"
}

t_check_fails_on_mismatch() {
  # The check must be able to fail: two launches against... a worker that pushes
  # with a different number of rounds than the others expect.
  set +e
  "$LAUNCH" --servers 1 --workers 2 --timeout 120 --log-dir "$TDIR/logs" \
    --worker-opt 1:--rounds --worker-opt 1:2 -- --app check --rounds 3
  rc=$?
  [ $rc -ne 0 ] || fail "check passed although worker 1 pushed fewer rounds"
  grep -q '^check FAILED' "$TDIR/logs/worker-0.log" || fail "worker 0 did not report check FAILED"
  no_strays "$TDIR/logs"
}
