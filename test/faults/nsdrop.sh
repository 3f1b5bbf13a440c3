# Fault tests (sourced by faults.sh): pskvctl drop NAMESPACE with a server that is
# not there to answer.

# A service of 2 servers at R = 2; group A ends; server-1 is paused (SIGSTOP) and
# pskvctl drop A asked at once: the drop waits for server-1's answer until the
# scheduler declares it dead (silent), then completes with server-0's tables alone
# (it holds every partition); server-1, resumed, finds itself dead and exits 3
# without bringing A back: status lists no A (not from the dead server's last report
# either) and server-0 holds no table bytes.
tags nsdrop_paused_server once
f_nsdrop_paused_server() {
  local port svc st i bytes
  port=$(free_port)
  svc=127.0.0.1:$port
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 2 --replicas 2 --service
  start server-0 "$BIN/pskv-server" --scheduler "$svc"
  start server-1 "$BIN/pskv-server" --scheduler "$svc"
  wait_line "$TDIR/scheduler.log" 'cluster complete' 1 $((60 * TS)) || fail "no service"
  timeout $((60 * TS)) "$BIN/pskv-worker" --scheduler "$svc" --group A --group-size 1 --app check --rounds 3 \
    > "$TDIR/a.log" 2>&1 || fail "group A: $(tail -n 2 "$TDIR/a.log")"
  wait_line "$TDIR/scheduler.log" 'group A ended' 1 $((10 * TS)) || fail "group A did not end"
  for i in $(seq $((50 * TS))); do # both servers have reported A (the paused one's
    "$BIN/pskvctl" --scheduler "$svc" status | grep -q '^namespace A: .* on 2 servers' && break
    sleep 0.1 # last report then names it: it must not be listed once dead)
  done
  kill -STOP "$(cat "$TDIR/server-1.pid")"
  "$BIN/pskvctl" --scheduler "$svc" drop A > "$TDIR/drop.out" 2>&1 ||
    { kill -CONT "$(cat "$TDIR/server-1.pid")"; fail "drop A: $(cat "$TDIR/drop.out")"; }
  kill -CONT "$(cat "$TDIR/server-1.pid")"
  grep -q '^dropped namespace A: 2 tables' "$TDIR/drop.out" || fail "said: $(cat "$TDIR/drop.out")"
  grep -q "namespace 'A' dropped (pskvctl drop from .*: 2 tables, .* on 1 servers (the others died" \
    "$TDIR/scheduler.log" ||
    fail "the scheduler: $(grep "namespace 'A'" "$TDIR/scheduler.log")"
  wait_exit "$(cat "$TDIR/server-1.pid")" $((30 * TS))
  st=$?
  [ "$st" = 3 ] || fail "the paused server-1 exited $st: $(tail -n 2 "$TDIR/server-1.log")"
  for i in $(seq $((50 * TS))); do
    bytes=$("$BIN/pskvctl" --scheduler "$svc" status --json |
      python3 -c 'import json,sys; print(sum(n.get("bytes", 0) for n in json.load(sys.stdin)["nodes"] if n["role"] == "server" and n["alive"]))')
    [ "$bytes" = 0 ] && break
    sleep 0.1
  done
  [ "$bytes" = 0 ] || fail "the live server's table bytes after the drop: $bytes"
  "$BIN/pskvctl" --scheduler "$svc" status | grep -q '^namespace A' && fail "status lists A"
  "$BIN/pskvctl" --scheduler "$svc" shutdown > /dev/null 2>&1 || fail "shutdown"
  wait_exit "$(cat "$TDIR/scheduler.pid")" $((30 * TS)) > /dev/null || fail "the service did not end"
  wait_exit "$(cat "$TDIR/server-0.pid")" $((30 * TS)) > /dev/null
  return 0
}
