# Admission and eviction of sparse rows (sourced by integration.sh), seen through
# pskvctl status and the exit report.

# Sums a counter over the servers of a pskvctl status --json.
# (a server's namespaces carry "bytes" too, once its heartbeats report them: not
# summed, or the bytes doubled between two reads: "bytes did not drop")
status_sum() { "$BIN/pskvctl" --scheduler "127.0.0.1:$1" status --json 2>/dev/null |
  sed 's/"namespaces":\[[^]]*\]//g' |
  grep -o "\"$2\":[0-9]*" | awk -F: '{ s += $2 } END { print s + 0 }'; }

# waits (at most 5 s) until the servers' heartbeats report `rows` = $2
wait_rows() { local i; for i in $(seq 50); do
  [ "$(status_sum "$1" rows)" -eq "$2" ] && return 0; sleep 0.1; done; return 1; }

t_admit_evict() {
  # --admit-after 3 --evict-after 2 on a sparse table, 3 servers, R = 2: keys pushed
  # fewer than 3 times get no row (the worker checks pull_all and the values); the
  # dense table with the same settings is refused at TABLE_OPEN; pskvctl status
  # shows rows, admitted and dropped pushes, then rows and bytes going down when
  # the sweep evicts what was not pushed for 2 clocks; the exit report says so too
  local port b1 b2 m1 m2 r i
  port=$(free_port)
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 3 --workers 1 --replicas 2
  for r in 0 1 2; do start "server-$r" "$BIN/pskv-server" --scheduler "127.0.0.1:$port"; done
  start worker-0 "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --app admit --admit-after 3 \
    --evict-after 2 --replay-wait "$TDIR/go"
  wait_line worker-0.log 'admit: waiting for' 1 60 || fail "no admission: $(tail -n 3 worker-0.log)"
  grep -q "dense table with admit_after 3.*invalid.*'admit_after' applies to sparse tables only" \
    worker-0.log || fail "dense table not refused: $(grep 'dense table' worker-0.log)"
  grep -q '^admit: 10000 rows for 10000 keys pushed 3 or more times of 20000' worker-0.log ||
    fail "admission: $(grep '^admit' worker-0.log)"
  wait_rows "$port" 20000 || fail "status: $(status_sum "$port" rows) rows, want 20000 (2 copies)"
  [ "$(status_sum "$port" not_admitted)" -gt 0 ] || fail "status shows no pushes dropped"
  "$BIN/pskvctl" --scheduler "127.0.0.1:$port" status | grep -q 'ROWS .*ADMITTED .*EVICTED .*BYTES' ||
    fail "pskvctl status prints no table counters"
  b1=$(status_sum "$port" bytes) m1=$(status_sum "$port" rss)
  touch "$TDIR/go.1"
  wait_line worker-0.log 'admit: waiting for' 2 60 || fail "no eviction: $(tail -n 3 worker-0.log)"
  wait_rows "$port" 1000 || fail "status: $(status_sum "$port" rows) rows after eviction, want 1000"
  # the sweep gives the arrays back once a whole pass ends: up to 5 s for the bytes
  # (the three 4 MiB sketches stay)
  for i in $(seq 50); do b2=$(status_sum "$port" bytes); [ "$b2" -lt "$b1" ] && break; sleep 0.1; done
  m2=$(status_sum "$port" rss)
  [ "$(status_sum "$port" evicted)" -ge 19000 ] || fail "status: $(status_sum "$port" evicted) evicted"
  [ "$b2" -lt "$b1" ] || fail "bytes did not drop: $b1 -> $b2"
  touch "$TDIR/go.2"
  wait_exit "$(cat worker-0.pid)" 60 || fail "worker exited $?: $(tail -n 3 worker-0.log)"
  kill "$(cat server-0.pid)" "$(cat server-1.pid)" "$(cat server-2.pid)" "$(cat scheduler.pid)"
  for r in 0 1 2; do
    wait_exit "$(cat "server-$r.pid")" 10 > /dev/null
    grep -q "table 'admit.w': .* rows, .* bytes; .* admitted, .* pushes dropped" "server-$r.log" ||
      fail "server $r reports no admission counters"
  done
  # RSS is shown, not asserted: under ASan freed memory sits in its quarantine
  echo "status bytes $b1 -> $b2, resident $m1 -> $m2 (rows 20000 -> 1000)"
  "$BIN/pskv-worker" --scheduler 127.0.0.1:1 --app softmax --evict-after 5 > out 2>&1
  [ $? -eq 2 ] && grep -q -- '--evict-after applies to sparse tables' out ||
    fail "--evict-after on softmax: $(cat out)"
  "$BIN/pskv-worker" --scheduler 127.0.0.1:1 --app admit --admit-after 256 > out 2>&1
  [ $? -eq 2 ] && grep -q -- 'admit-after' out || fail "--admit-after 256: $(cat out)"
}
