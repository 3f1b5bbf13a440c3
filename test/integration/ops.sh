# Operations tests (sourced by integration.sh): what an operator meets around a
# job's life (a late node, the metrics endpoints). Each function runs in its own
# test directory ($TDIR) under run_test's time-out.

# ms_now: milliseconds on the monotonic-enough wall clock of date (for bounds of
# about a second; the daemons' own timers are on CLOCK_MONOTONIC).
ms_now() { echo $(( $(date +%s%N) / 1000000 )); }

# A node registering with a scheduler whose job is over is refused at once with
# "job J finished" and exits 1 within 1 s (the scheduler stays up for --linger).
tags late_registration serial
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

# metrics_scrape PORT: the body of http://127.0.0.1:PORT/metrics (curl, else bash's
# /dev/tcp), on stdout; 1 when nothing answered.
metrics_scrape() {
  if command -v curl > /dev/null; then
    curl -sf --max-time 5 "http://127.0.0.1:$1/metrics"
  else
    local body
    exec 3<> "/dev/tcp/127.0.0.1/$1" || return 1
    printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
    body=$(timeout 5 cat <&3); exec 3<&-
    [[ $body == "HTTP/1."?" 200"* ]] || return 1
    sed '1,/^\r$/d' <<< "$body"
  fi
}

# prom_query PORT QUERY: the value of an instant query's first sample, or "".
prom_query() {
  curl -sf --max-time 5 -G "http://127.0.0.1:$1/api/v1/query" --data-urlencode "query=$2" |
    grep -o '"value":\[[^]]*\]' | head -n 1 | sed 's/.*,"\([^"]*\)"\]/\1/'
}

# A real Prometheus scrapes a 2-server, 2-worker check job every second; the sum
# of pskv_push_bytes_total it holds must equal the bytes the workers report
# pushing, and promtool must accept every daemon's /metrics. The workers keep
# their final values up (--metrics-linger) before leaving the job, so that the
# scheduler and servers serve too, until the test has its answers and sends
# them SIGTERM.
t_metrics_prometheus() {
  if ! command -v prometheus > /dev/null || ! command -v promtool > /dev/null; then
    [ "${CI:-}" = true ] && fail "prometheus or promtool missing under CI (install-deps.sh installs them)"
    echo "prometheus or promtool not installed"; exit 77
  fi
  command -v curl > /dev/null || fail "curl missing (install-deps.sh installs it)"
  # the alert rules operations.md gives
  sed -n '/^<!-- alert-rules -->$/,/^<!-- \/alert-rules -->$/p' "$top/docs/operations.md" |
    sed '/^<!--/d; /^```/d' > rules.yml
  grep -q 'alert: PskvCheckpointFailed' rules.yml || fail "no alert rules found in operations.md"
  promtool check rules rules.yml > rules.out 2>&1 || fail "promtool rejects the documented rules: $(cat rules.out)"
  local port pp ms m0 m1 w0 w1 targets d expect got i
  trap 'for f in "$TDIR"/*.pid; do kill -KILL "$(cat "$f")" 2>/dev/null; done' EXIT
  port=$(free_port); pp=$(free_port); ms=$(free_port); m0=$(free_port); m1=$(free_port)
  w0=$(free_port); w1=$(free_port)
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 2 --workers 2 --metrics-port "$ms"
  start server-0 "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --metrics-port "$m0"
  start server-1 "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --metrics-port "$m1"
  wait_servers "$port" 2 > /dev/null || fail "servers did not register"
  targets="'127.0.0.1:$ms','127.0.0.1:$m0','127.0.0.1:$m1','127.0.0.1:$w0','127.0.0.1:$w1'"
  cat > prometheus.yml <<YML
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: pskv
    static_configs: [{targets: [$targets]}]
YML
  start prometheus prometheus --config.file=prometheus.yml --storage.tsdb.path="$TDIR/tsdb" \
    --web.listen-address="127.0.0.1:$pp"
  for i in $(seq 100); do curl -sf "http://127.0.0.1:$pp/-/ready" > /dev/null && break; sleep 0.2; done
  curl -sf "http://127.0.0.1:$pp/-/ready" > /dev/null || fail "prometheus not ready: $(tail -n 3 prometheus.log)"
  start worker-0 "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --rank 0 --app check --rounds 20 \
    --metrics-port "$w0" --metrics-linger 120
  start worker-1 "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --rank 1 --app check --rounds 20 \
    --metrics-port "$w1" --metrics-linger 120
  for d in worker-0 worker-1; do
    wait_line $d.log 'pushed [0-9]* value bytes in all' 1 90 || fail "$d did not finish: $(tail -n 3 $d.log)"
    grep -q '^check ok:' $d.log || fail "$d: check failed: $(grep '^check' $d.log | tail -n 2)"
  done
  # every daemon is up now with its final values: promtool on each
  for d in "scheduler:$ms" "server-0:$m0" "server-1:$m1" "worker-0:$w0" "worker-1:$w1"; do
    metrics_scrape "${d#*:}" > "metrics-${d%%:*}.txt" || fail "no /metrics from ${d%%:*}"
    promtool check metrics < "metrics-${d%%:*}.txt" > "promtool-${d%%:*}.out" 2>&1 ||
      fail "promtool rejects ${d%%:*}'s metrics: $(head -n 5 "promtool-${d%%:*}.out")"
  done
  grep -q '^pskv_table_rows{.*table="check.dense"}' metrics-server-0.txt || fail "server shows no rows per table"
  for i in $(seq 20); do # the scheduler refreshes its gauges every 500 ms
    metrics_scrape "$ms" | grep -q '^pskv_nodes_alive{.*of="worker"} 2$' && break; sleep 0.2
  done
  metrics_scrape "$ms" | grep -q '^pskv_nodes_alive{.*of="worker"} 2$' || fail "scheduler does not show 2 live workers"
  metrics_scrape "$ms" | grep -q '^pskv_worker_clock_lag{.*worker_rank="1"} 0$' || fail "scheduler shows no clock lag of rank 1"
  metrics_scrape "$ms" | grep -q '^pskv_nodes_alive{.*of="evaluator"} 0$' || fail "scheduler shows no evaluator count"
  expect=$(cat worker-0.log worker-1.log | sed -n 's/.*pushed \([0-9]*\) value bytes in all.*/\1/p' |
    awk '{s += $1} END {print s}')
  [ "${expect:-0}" -gt 0 ] || fail "workers reported no pushed bytes"
  for i in $(seq 60); do
    got=$(prom_query "$pp" 'sum(pskv_push_bytes_total)')
    [ "$got" = "$expect" ] && break
    sleep 0.5
  done
  echo "workers pushed $expect bytes; prometheus sum(pskv_push_bytes_total) = $got"
  [ "$got" = "$expect" ] || fail "prometheus has $got, workers pushed $expect"
  for i in $(seq 20); do
    got=$(prom_query "$pp" 'count(up{job="pskv"} == 1)'); [ "$got" = 5 ] && break; sleep 0.5
  done
  [ "$got" = 5 ] || fail "prometheus scraped $got of 5 targets: $(curl -s "http://127.0.0.1:$pp/api/v1/targets" | grep -o '"lastError":"[^"]*"' | sort | uniq -c)"
  kill -TERM "$(cat worker-0.pid)" "$(cat worker-1.pid)"
  for d in worker-0 worker-1 scheduler server-0 server-1; do
    wait_exit "$(cat $d.pid)" 30 || fail "$d exited $?: $(tail -n 3 $d.log)"
  done
  kill -TERM "$(cat prometheus.pid)"
  wait_exit "$(cat prometheus.pid)" 20 || fail "prometheus exited $?"
  no_strays "$TDIR"
}

# pskvctl top, not on a terminal, prints plain lines: per refresh a job line and a
# line per node, workers with a step rate and servers with push and pull rates from
# the second refresh on, and exactly one worker marked slowest.
t_ctl_top() {
  local port out r
  port=$(free_port)
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 2 --workers 2
  start server-0 "$BIN/pskv-server" --scheduler "127.0.0.1:$port"
  start server-1 "$BIN/pskv-server" --scheduler "127.0.0.1:$port"
  start worker-0 "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --rank 0 --app check --rounds 100000 --stop-file stop --count-acked
  start worker-1 "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --rank 1 --app check --rounds 100000 --stop-file stop --count-acked
  wait_line scheduler.log 'cluster complete' 1 60 || fail "the job did not start"
  sleep 1
  "$BIN/pskvctl" --scheduler "127.0.0.1:$port" top --count 3 --interval 0.5 > top.out 2> top.err ||
    fail "pskvctl top exited $?: $(cat top.err)"
  touch stop
  cat top.out
  [ "$(grep -c '^job [0-9]* state=running' top.out)" -eq 3 ] || fail "not 3 refreshes"
  [ "$(grep -c '^server node=' top.out)" -eq 6 ] || fail "not a line per server per refresh"
  [ "$(grep -c '^worker node=' top.out)" -eq 6 ] || fail "not a line per worker per refresh"
  [ "$(grep -c 'slowest=1' top.out)" -eq 3 ] || fail "not one slowest worker per refresh"
  tail -n 4 top.out | grep '^worker' | grep -q 'steps_per_s=[0-9.]* waiting=[0-9.]* rss_mib=[0-9.]*' ||
    fail "no worker rates in the last refresh"
  tail -n 4 top.out | grep '^server' | grep -q 'partitions=[0-9]* chains=[0-9]* pushes_per_s=[0-9]* pulls_per_s=[0-9]*' ||
    fail "no server rates in the last refresh"
  grep -q $'\033' top.out && fail "escape sequences in plain mode"
  for r in 0 1; do
    wait_exit "$(cat worker-$r.pid)" 120 || fail "worker $r exited $?: $(tail -n 3 worker-$r.log)"
  done
  for d in scheduler server-0 server-1; do wait_exit "$(cat $d.pid)" 20 || fail "$d exited $?"; done
}
