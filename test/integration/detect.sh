# shellcheck shell=bash
# Failure detection (sourced by integration.sh; scheduler/detect.h): a crashed
# server noticed from its closed connection, a silent one by its phi-accrual lease,
# the dialing side told at once that nothing listens, the detector visible in
# pskvctl status and Prometheus, bad flags. Every test runs at the default time-outs
# (no --dead-after-ms, no --heartbeat-ms) but the one that tests those flags. Each
# function runs in its own test directory ($TDIR) under run_test's time-out.

# d_first_push_ms DIR: the earliest "failover: first push" line of DIR's workers, ms
# since the epoch (empty when none).
d_first_push_ms() {
  local line t first=""
  while read -r line; do
    t=$(date -d "$(cut -c1-23 <<< "$line" | tr T ' ')Z" +%s%3N 2>/dev/null)
    [ -n "$t" ] && { [ -z "$first" ] || [ "$t" -lt "$first" ]; } && first=$t
  done < <(grep -h 'failover: first push' "$1"/worker-*.log)
  echo "$first"
}

d_sched_port() { sed -n 's/.*scheduler listening on port \([0-9]*\).*/\1/p' "$1/scheduler.log" | head -n 1; }

# d_joined DIR N: waits (30 s) until N workers of DIR joined.
d_joined() {
  local i
  for i in $(seq 300); do
    [ "$(cat "$1"/worker-*.log 2>/dev/null | grep -c 'joined job')" -ge "$2" ] && return 0
    sleep 0.1
  done
  fail "workers did not join: $(tail -n 3 "$1/launch.out" 2>/dev/null)"
}

# kill -9 of one of 3 servers (R = 2) under 4 pushing workers, at the defaults: the
# scheduler declares it dead from its closed connection (the probe finds its port
# refused), sooner than any lease could (asserted loosely: within 800 ms of the
# kill; the benchmark measures the failover exactly); pskvctl status (table and --json) and the Prometheus gauges say which
# detector fired and show every live node's phi and heartbeat gaps; the sums stay
# exact.
tags detect_kill_server
t_detect_kill_server() {
  local d=$TDIR/logs mp victim t0 first js port line tdead
  mp=$(free_port)
  "$LAUNCH" --log-dir "$d" --timeout 150 --servers 3 --workers 4 --scheduler-opt=--replicas=2 \
    --scheduler-opt=--metrics-port=$mp -- --app check --rounds 800 > "$d.out" 2>&1 &
  local lp=$!
  mkdir -p "$d"; d_joined "$d" 4
  sleep 1
  port=$(d_sched_port "$d")
  js=$("$BIN/pskvctl" --scheduler "127.0.0.1:$port" status --json) || fail "status: $js"
  grep -q '"phi_threshold":8,"min_dead_after_ms":800,"dead_after_ms":5000' <<< "$js" ||
    fail "status does not show the default detector settings: $js"
  # every server node carries its phi and heartbeat gaps (read as JSON: a node holds
  # nested objects, such as its namespaces, so no pattern over the text)
  python3 -c 'import json, sys
n = [x for x in json.load(sys.stdin)["nodes"] if x["role"] == "server"]
sys.exit(not n or not all(isinstance(x.get("phi"), (int, float)) and "gap_mean_ms" in x and
                          "gap_sd_ms" in x and x.get("gaps", 0) >= 1 for x in n))' <<< "$js" ||
    fail "status shows no server's phi and heartbeat gaps: $js"
  victim=$((RANDOM % 3))
  t0=$(date +%s%3N)
  kill -KILL "$(cat "$d/server-$victim.pid")"
  wait_line "$d/scheduler.log" 'is dead (connection closed): marked dead' 1 10 ||
    fail "the killed server was not declared dead from its connection: $(grep -i dead "$d/scheduler.log" | tail -n 3)"
  js=$("$BIN/pskvctl" --scheduler "127.0.0.1:$port" status --json)
  python3 -c 'import json, sys
sys.exit(not any(x.get("state") == "dead" and x.get("dead_reason") == "connection closed"
                 for x in json.load(sys.stdin)["nodes"]))' <<< "$js" ||
    fail "status --json does not say why the server is dead: $js"
  "$BIN/pskvctl" --scheduler "127.0.0.1:$port" status | grep -q 'dead (connection closed)' ||
    fail "the status table does not say why the server is dead"
  curl -s "http://127.0.0.1:$mp/metrics" > metrics.txt
  grep -q '^pskv_node_phi{.*node_of="server-[0-2]"} ' metrics.txt &&
    grep -q '^pskv_node_heartbeat_gap_mean_seconds{' metrics.txt &&
    grep -q '^pskv_declared_dead_then_heard_total{.*of="server"} 0' metrics.txt ||
    fail "Prometheus: no phi, gap or declared-dead-then-heard series: $(grep -c . metrics.txt) lines"
  wait "$lp" || fail "the job failed: $(grep -h FAILED "$d.out" "$d"/worker-*.log | head -n 3)"
  grep -q '^check ok' "$d.out" || fail "no 'check ok'"
  first=$(d_first_push_ms "$d")
  [ -n "$first" ] || fail "no worker logged a failover"
  line=$(grep -m 1 'is dead (connection closed)' "$d/scheduler.log")
  tdead=$(date -d "$(cut -c1-23 <<< "$line" | tr T ' ')Z" +%s%3N)
  echo "declared dead $((tdead - t0)) ms and failover $((first - t0)) ms after kill -9 (load $(cut -d' ' -f1 /proc/loadavg))"
  # loosely: sooner than a lease could (--min-dead-after-ms 800); on a quiet machine
  # it is a few ms (docs/benchmarks.md), on one loaded 20 deep a few hundred
  [ $((tdead - t0)) -lt 800 ] || fail "declared dead $((tdead - t0)) ms after the kill: not sooner than the lease"
  grep -q 'is silent for\|(silent ' "$d/scheduler.log" && fail "a node was declared dead by silence"
  return 0
}

# With --keys the listening socket's one monitor is the ZAP handler's; it feeds both
# the refusals (a plaintext worker tried during the job is logged as refused) and
# the failure detector (a kill -9 of a server, R = 2, is declared dead from its
# closed connection, not left to the lease); the sums stay exact.
tags detect_kill_keyed keys
t_detect_kill_keyed() {
  local d=$TDIR/logs K=$TDIR/keys port t0 line tdead
  "$BIN/pskvctl" keys init "$K" --servers 3 --workers 2 > /dev/null || fail "keys init failed"
  port=$(free_port)
  "$LAUNCH" --log-dir "$d" --timeout 150 --servers 3 --workers 2 --port "$port" --keys "$K" \
    --scheduler-opt=--replicas=2 -- --app check --rounds 800 > "$d.out" 2>&1 &
  local lp=$!
  mkdir -p "$d"; d_joined "$d" 2
  timeout 20 "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --app check --connect-timeout 1 \
    > nokey.log 2>&1 && fail "a worker without a key joined"
  t0=$(date +%s%3N)
  kill -KILL "$(cat "$d/server-$((RANDOM % 3)).pid")"
  wait_line "$d/scheduler.log" 'is dead (connection closed): marked dead' 1 10 ||
    fail "with --keys the killed server was not declared dead from its connection: $(grep -i 'dead\|monitor' "$d/scheduler.log" | tail -n 3)"
  wait "$lp" || fail "the job failed: $(grep -h FAILED "$d.out" "$d"/worker-*.log | head -n 3)"
  grep -q '^check ok' "$d.out" || fail "no 'check ok'"
  line=$(grep -m 1 'is dead (connection closed)' "$d/scheduler.log")
  tdead=$(date -d "$(cut -c1-23 <<< "$line" | tr T ' ')Z" +%s%3N)
  echo "with --keys: declared dead $((tdead - t0)) ms after kill -9 (load $(cut -d' ' -f1 /proc/loadavg))"
  [ $((tdead - t0)) -lt 800 ] || fail "declared dead $((tdead - t0)) ms after the kill: not sooner than the lease"
  # counted as plaintext or, as the monitor's events come, as a failed handshake
  grep -q 'refused \(plaintext\|handshake\) from' "$d/scheduler.log" ||
    fail "the ZAP monitor no longer counts refusals: none logged for the keyless worker"
  return 0
}

# A server whose chain neighbour's connection closes tells the scheduler
# (PEER_CLOSED), which probes that server and, its port refused, declares it dead
# (connection closed). The scheduler's own monitor is off (the test hook
# PSKV_TEST_NO_MONITOR, as when it cannot start), so only the servers' reports can
# say so sooner than the lease: kill -9 of one of 3 servers (R = 2) under 4 workers.
tags detect_peer_report
t_detect_peer_report() {
  local d=$TDIR/logs t0 line tdead
  PSKV_TEST_NO_MONITOR=1 "$LAUNCH" --log-dir "$d" --timeout 150 --servers 3 --workers 4 \
    --scheduler-opt=--replicas=2 -- --app check --rounds 800 > "$d.out" 2>&1 &
  local lp=$!
  mkdir -p "$d"; d_joined "$d" 4
  grep -q 'test hook PSKV_TEST_NO_MONITOR' "$d/scheduler.log" || fail "the scheduler did not take the test hook"
  sleep 1
  t0=$(date +%s%3N)
  kill -KILL "$(cat "$d/server-$((RANDOM % 3)).pid")"
  wait_line "$d/scheduler.log" 'is dead (connection closed): marked dead' 1 10 ||
    fail "the killed server was not declared dead from its neighbours' reports: $(grep -i 'dead\|reports' "$d/scheduler.log" | tail -n 3)"
  wait "$lp" || fail "the job failed: $(grep -h FAILED "$d.out" "$d"/worker-*.log | head -n 3)"
  grep -q '^check ok' "$d.out" || fail "no 'check ok'"
  grep -q 'reports that its connection to server node [0-9]* closed: probing it' "$d/scheduler.log" ||
    fail "no server's report reached the scheduler"
  grep -q 'the connection to server node [0-9]* (.*) closed: told the scheduler' "$d"/server-*.log ||
    fail "no server said it told the scheduler"
  line=$(grep -m 1 'is dead (connection closed)' "$d/scheduler.log")
  tdead=$(date -d "$(cut -c1-23 <<< "$line" | tr T ' ')Z" +%s%3N)
  echo "declared dead $((tdead - t0)) ms after kill -9 from a neighbour's report (load $(cut -d' ' -f1 /proc/loadavg))"
  [ $((tdead - t0)) -lt 800 ] || fail "declared dead $((tdead - t0)) ms after the kill: not sooner than the lease"
  return 0
}

# SIGSTOP of a server for 3 s at the defaults (longer if not yet declared dead: on a
# loaded host the time-out grows up to --dead-after-ms): its connections stay open,
# so the lease (phi-accrual, at least --min-dead-after-ms) declares it dead; it is replaced,
# learns so on SIGCONT and exits 3; the sums stay exact (the lease rule: it served
# nothing once replaced). Declared dead no sooner than --min-dead-after-ms.
tags detect_pause_server
t_detect_pause_server() {
  local d=$TDIR/logs pid t0 tdead line
  "$LAUNCH" --log-dir "$d" --timeout 150 --servers 3 --workers 3 --scheduler-opt=--replicas=2 \
    -- --app check --rounds 1500 > "$d.out" 2>&1 &
  local lp=$!
  mkdir -p "$d"; d_joined "$d" 3
  sleep 0.5
  pid=$(cat "$d/server-1.pid")
  t0=$(date +%s%3N)
  kill -STOP "$pid"
  sleep 3 # and on until declared dead: a loaded host's pauses lengthen the time-out
  wait_line "$d/scheduler.log" 'is dead (silent' 1 5
  kill -CONT "$pid"
  wait "$lp" || fail "the job failed: $(grep -h FAILED "$d.out" "$d"/worker-*.log | head -n 3)"
  grep -q '^check ok' "$d.out" || fail "no 'check ok'"
  line=$(grep -m 1 'is dead (silent [0-9]* ms, phi [0-9.]*): marked dead' "$d/scheduler.log") ||
    fail "the paused server was not declared dead by its lease: $(grep -i dead "$d/scheduler.log" | head -n 3)"
  grep -q 'connection closed' "$d/scheduler.log" && fail "a connection-closed death while nothing closed"
  tdead=$(date -d "$(cut -c1-23 <<< "$line" | tr T ' ')Z" +%s%3N)
  echo "declared dead $((tdead - t0)) ms after SIGSTOP: ${line#*is dead }"
  [ $((tdead - t0)) -ge 700 ] || fail "declared dead $((tdead - t0)) ms after the stop: sooner than --min-dead-after-ms"
  [ $((tdead - t0)) -le 5500 ] || fail "declared dead only $((tdead - t0)) ms after the stop (--dead-after-ms 5000)"
  grep -q 'server-1 (pid [0-9]*) exited with status 3' "$d.out" ||
    fail "the paused server did not exit 3: $(grep server-1 "$d.out")"
  grep -q 'declared this server dead' "$d/server-1.log" || fail "the paused server did not say it was replaced"
}

# The flags: out of range exits 2 naming the flag.
t_detect_bad_flags() {
  local a out
  for a in "--phi-threshold 0:--phi-threshold 0 must be above 0" \
           "--phi-threshold -1:phi-threshold" \
           "--min-dead-after-ms 6000:--min-dead-after-ms 6000 is above --dead-after-ms 5000" \
           "--min-dead-after-ms 100:--min-dead-after-ms 100 must be at least 2 x --heartbeat-ms" \
           "--dead-after-ms 150:--dead-after-ms 150 must be at least 2 x --heartbeat-ms"; do
    # shellcheck disable=SC2086
    out=$(timeout 10 "$BIN/pskv-scheduler" --port 0 ${a%%:*} 2>&1); local rc=$?
    [ $rc -eq 2 ] || fail "'${a%%:*}': exit $rc, not 2: $out"
    grep -q -- "${a#*:}" <<< "$out" || fail "'${a%%:*}' does not name the flag: $out"
  done
  "$BIN/pskv-scheduler" --help | grep -q -- '--phi-threshold' || fail "--help does not list --phi-threshold"
  "$BIN/pskv-scheduler" --help | grep -q -- '--min-dead-after-ms' || fail "--help does not list --min-dead-after-ms"
}

# A node whose scheduler's port refuses says so at once (not after --connect-timeout),
# keeps retrying, and registers once a scheduler listens there (Slurm starts every
# task at once); with none at all it gives up after --connect-timeout, saying why.
tags detect_refused_scheduler
t_detect_refused_scheduler() {
  local port t0
  port=$(free_port)
  t0=$SECONDS
  start server-0 "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --connect-timeout 20
  wait_line server-0.log "nothing listens at 127.0.0.1:$port (connection refused); retrying until --connect-timeout" 1 3 ||
    fail "the server did not say at once that nothing listens: $(cat server-0.log)"
  [ $((SECONDS - t0)) -le 3 ] || fail "it took $((SECONDS - t0)) s to say so"
  sleep 1
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 1
  wait_line scheduler.log 'server registered' 1 10 || fail "the server did not register once the scheduler listened: $(tail -n 3 server-0.log)"
  grep -q "scheduler 127.0.0.1:$port listens now" server-0.log || fail "the server did not say the scheduler listens now"
  kill "$(cat server-0.pid)" "$(cat scheduler.pid)"
  port=$(free_port)
  "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --connect-timeout 2 --app check > worker.log 2>&1 &&
    fail "the worker exited 0 without a scheduler"
  grep -q "nothing listens there (connection refused) within 2.0 s (--connect-timeout)" worker.log ||
    fail "the worker's error does not say nothing listens: $(tail -n 2 worker.log)"
}

# d_cgroup NAME: a CPU cgroup of its own with a quota of 150 ms of CPU per 1 s
# period (cgroup v2 cpu.max, or v1 cpu.cfs_*): a process in it that uses its quota
# is stopped, every thread, heartbeats too, until the period ends, up to 850 ms (the
# CPU limit of a container on a shared node). Prints its directory; fails (1) when
# no cgroup can be made here (not root, no cpu controller).
d_cgroup() {
  local g
  if grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    g=/sys/fs/cgroup/pskv-$1-$$
    mkdir "$g" 2>/dev/null && echo "150000 1000000" > "$g/cpu.max" 2>/dev/null || { rmdir "$g" 2>/dev/null; return 1; }
  else
    g=/sys/fs/cgroup/cpu/pskv-$1-$$
    mkdir "$g" 2>/dev/null && echo 1000000 > "$g/cpu.cfs_period_us" 2>/dev/null &&
      echo 150000 > "$g/cpu.cfs_quota_us" 2>/dev/null || { rmdir "$g" 2>/dev/null; return 1; }
  fi
  echo "$g"
}

# d_throttled CGROUP: the times its processes were stopped at their quota.
d_throttled() { sed -n 's/^nr_throttled //p' "$1/cpu.stat"; }

# d_load_run NAME CGROUP [SCHEDULER FLAGS]: a 3-server (R = 2), 4-worker check job
# whose servers run in CGROUP (moved there as they start; the scheduler and the
# workers outside, so that the scheduler hears the workers while the servers
# stall); prints the number of nodes declared dead, and "failed" after it when the
# job failed (a false death of two servers loses partitions).
d_load_run() {
  local d=$TDIR/$1 g=$2 f=() a s i; shift 2
  for a in "$@"; do f+=(--scheduler-opt="$a"); done
  mkdir -p "$d"
  "$LAUNCH" --log-dir "$d" --timeout 150 --servers 3 --workers 4 --scheduler-opt=--replicas=2 \
    "${f[@]}" -- --app check --rounds 50 > "$d.out" 2>&1 &
  local lp=$!
  for i in $(seq 400); do
    for s in 0 1 2; do
      [ -f "$d/server-$s.pid" ] && [ ! -f "$d/in-cgroup-$s" ] &&
        echo "$(cat "$d/server-$s.pid")" > "$g/cgroup.procs" && touch "$d/in-cgroup-$s"
    done
    [ "$(ls "$d"/in-cgroup-* 2>/dev/null | wc -l)" -eq 3 ] && break
    sleep 0.05
  done
  wait "$lp" && grep -q '^check ok' "$d.out"
  local rc=$?
  echo "$(grep -c 'marked dead' "$d/scheduler.log")$([ $rc -eq 0 ] || echo ' failed')"
}

# The load that made scripts pass --dead-after-ms 2000 or 5000: daemons stalled for
# most of a second now and then (a loaded shared node; here, reproducibly, the
# servers' CPU limit, d_cgroup: up to 850 ms stopped each time they use their
# 150 ms). At the defaults the job finishes exact with no node declared dead
# (PSKV_DETECT_LOAD_RUNS times in a row, 1 in make test: each run is about 19 s; the
# 10-minute soaks of scripts/bench-detect.sh are the long check); the same job with
# the old fixed lease (500 ms: --min-dead-after-ms 500 --dead-after-ms 500) declares
# nodes dead (the control: the test can fail).
tags detect_load slow root
t_detect_load() {
  local g n k dead=()
  g=$(d_cgroup load) || { echo "cannot make a CPU cgroup here (root and the cpu controller needed)"; return 77; }
  n=$(d_load_run old "$g" --min-dead-after-ms=500 --dead-after-ms=500)
  echo "old fixed lease (500 ms): ${n% *} nodes declared dead${n#${n% *}} (servers stopped at their quota $(d_throttled "$g") times; load $(cut -d' ' -f1 /proc/loadavg))"
  for k in $(seq "${PSKV_DETECT_LOAD_RUNS:-1}"); do
    dead+=("$(d_load_run "defaults-$k" "$g")")
    echo "defaults, run $k: ${dead[-1]} nodes declared dead (stopped $(d_throttled "$g") times so far; load $(cut -d' ' -f1 /proc/loadavg))"
    [ "${dead[-1]}" = 0 ] || { grep -h 'marked dead\|FAILED' "$TDIR/defaults-$k/scheduler.log" "$TDIR/defaults-$k.out"; rmdir "$g"; fail "run $k at the defaults: ${dead[-1]} nodes declared dead"; }
  done
  k=$(d_throttled "$g")
  rmdir "$g" 2>/dev/null
  [ "${n% *}" -gt 0 ] || fail "the old fixed lease declared nobody dead: the stalls were not reproduced (stopped $k times in all)"
}
