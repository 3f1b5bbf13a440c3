# Fault tests (sourced by faults.sh): leases that lapse, a paused scheduler, a lost
# partition, a fill that lapses.

# A server whose lease lapses without its being declared dead (bsp, R = 2, the
# adaptive lease at the defaults) drops the forwards that reach it before its lease
# is renewed. Its predecessor must send them again (no new view will): the bsp
# closes reach the tail, the job ends with exact sums, and nothing is left waiting
# for a replica. The lease is the server's time-out minus one heartbeat, so a pause
# of the server alone falls in that one heartbeat's window or is a death; instead a
# worker is paused with it and resumed first: its gap of 1.7 s raises every node's
# time-out to 3 x 1.7 s (capped at --dead-after-ms, 5 s), the server's too while it
# is silent, but not the lease it was given before. The server's pause is its
# time-out read from pskvctl status + 600 ms: its lease has lapsed by 700 ms or more
# when it resumes, and the scheduler waits 5 s. The scheduler is held (SIGSTOP) for
# the server's first 0.5 s back, so that its loop meets the lapse before an
# acknowledgement renews the lease.
# A copy (FILL) that reaches a server whose lease has lapsed (R = 2, a server killed:
# the first copy to a new chain member waits 6.5 s, PSKV_TEST_FILL_DELAY_MS, while the
# scheduler is paused 7 s, so every lease, at most 4.9 s at the defaults, lapses
# before it arrives; the sender's loop blocked less than the 8 s after which its
# heartbeats stop): the member takes it
# anyway (a copy is sent once; before, it was dropped and the member waited for good),
# the run ends with exact sums, and no survivor is declared dead after the pause.
# fill_lapsed keeps its fixed heartbeat (1 s) and death time-out (4 s): it tests what a
# copy meets at a lapsed lease, not the detector. fill_lapsed_defaults is the same
# scenario at the detector's defaults: every server is heard again after the
# scheduler's 7 s pause and nobody is declared dead. It lost acknowledged pushes in
# about 1 run of 3 under load until a server stopped a dead chain peer's socket
# monitor before closing the monitor's PAIR (net_monitor_stop): closed the other way
# round, that peer's close, seen by ZeroMQ after the view that replaced it, blocked
# ZeroMQ's I/O thread for good, and the survivor, deaf and silent, was declared dead
# before its partner's copy was whole (docs/operations.md).
# fill_scenario DELAY_MS PAUSE_S [SCHEDULER_OPT...]: the scenario above, the copy held
# DELAY_MS and the scheduler stopped PAUSE_S seconds.
fill_scenario() {
  local d=$TDIR/c i line= delay=$1 pause=$2 opts=()
  shift 2
  for i in "$@"; do opts+=("--scheduler-opt=$i"); done
  PSKV_TEST_FILL_DELAY_MS=$delay launch "$d" --servers 3 --workers 2 --scheduler-opt=--replicas=2 \
    "${opts[@]}" -- --app check --count-acked --rounds 3000
  wait_joined "$d" 2
  sleep 0.5
  kill -KILL "$(cat "$d/server-0.pid")"
  for i in $(seq 200); do
    line=$(grep -h 'test hook PSKV_TEST_FILL_DELAY_MS: the copy' "$d"/server-*.log) && break
    sleep 0.05
  done
  [ -n "$line" ] || fail "no copy after the kill: $(grep -h 'view epoch' "$d"/server-1.log | tail -n 2)"
  kill -STOP "$(cat "$d/scheduler.pid")"; sleep "$pause"; kill -CONT "$(cat "$d/scheduler.pid")"
  wait_ok "$d"
  grep -q 'lease lapsed' "$d"/server-[12].log || fail "no lease lapsed: the copy met a valid lease"
  # the survivors are heard again after the pause (a deaf one was declared dead)
  grep -q 'is dead (silent' "$d/scheduler.log" &&
    fail "a survivor was declared dead after the pause: $(grep 'is dead (silent' "$d/scheduler.log")"
  echo "${line##*: }"
}

tags fill_lapsed once
f_fill_lapsed() { fill_scenario 5000 5.6 --heartbeat-ms=1000 --dead-after-ms=4000; }

tags fill_lapsed_defaults once
f_fill_lapsed_defaults() { fill_scenario 6500 7; }

# The gap fill_lapsed_defaults fell into, closed: R = 2, 3 servers, server 0 killed,
# each survivor's first copy held 3 s (PSKV_TEST_FILL_DELAY_MS), and the survivor that
# holds its copy first killed too, so the other one never gets its copies of the
# partitions it was joining. The scheduler knows who holds what whole (the servers'
# HEARTBEAT whole_epoch): each such partition is lost, as if no member were left,
# logged naming the partition, the dead sender and the survivor; status counts it,
# and the workers fail with PSKV_ELOST instead of reading what the survivor had.
# Before, the survivor took them on as they stood (an ERROR in its log) and the
# sums came out wrong.
tags fill_sender_dies once
f_fill_sender_dies() {
  local d=$TDIR/c i log= other node snode js lost lines lp rc t0 mp m=
  mp=$(free_port)
  PSKV_TEST_FILL_DELAY_MS=3000 launch "$d" --servers 3 --workers 2 --scheduler-opt=--replicas=2 \
    --scheduler-opt=--metrics-port=$mp -- --app check --count-acked --rounds 3000
  wait_joined "$d" 2
  sleep 0.5
  kill -KILL "$(cat "$d/server-0.pid")"
  for i in $(seq 200); do
    log=$(grep -l 'test hook PSKV_TEST_FILL_DELAY_MS: the copy' "$d"/server-[12].log | head -n 1)
    [ -n "$log" ] && break
    sleep 0.05
  done
  [ -n "$log" ] || fail "no copy after the kill"
  other=$(ls "$d"/server-[12].log | grep -v "$log")
  node=$(sed -n 's/.* server \([0-9]*\) INFO registered as node.*/\1/p' "$log")
  snode=$(sed -n 's/.* server \([0-9]*\) INFO registered as node.*/\1/p' "$other")
  kill -KILL "$(cat "${log%.log}.pid")"
  t0=$SECONDS
  wait_line "$d/scheduler.log" 'is dead (connection closed)' 2 20 ||
    fail "the second kill was not noticed: $(grep -h 'is dead' "$d/scheduler.log")"
  wait_line "$d/scheduler.log" "ERROR partition [0-9]* lost: its only whole replica (node $node) died while node $snode was still receiving its copy" 1 10 ||
    fail "the scheduler did not count the partitions node $snode awaited from node $node as lost: $(grep -h 'lost' "$d/scheduler.log" | tail -n 3)"
  js=$(status_json "$d") || fail "no status"
  lost=$(grep -o '"lost":[0-9]*' <<< "$js" | cut -d: -f2)
  # 16 named one by one, the rest counted on one line
  lines=$(( $(grep -c "ERROR partition [0-9]* lost: its only whole replica" "$d/scheduler.log") +
    $(sed -n 's/.* ERROR \([0-9]*\) more partitions lost the same way.*/\1/p' "$d/scheduler.log" | head -n 1) + 0 ))
  [ "${lost:-0}" -ge 1 ] && [ "$lost" -eq "$lines" ] ||
    fail "status counts ${lost:-no} lost partitions, the scheduler's log names $lines"
  "$BIN/pskvctl" --scheduler "127.0.0.1:$(sched_port "$d")" status | grep -q "; $lost partitions LOST" ||
    fail "pskvctl status does not show $lost partitions LOST"
  for i in $(seq $((50 * TS))); do # the gauges are refreshed every 500 ms
    m=$(curl -sf "http://127.0.0.1:$mp/metrics") &&
      grep -q "^pskv_partitions_lost{[^}]*} $lost\$" <<< "$m" && break
    sleep 0.1
  done
  grep -q "^pskv_partitions_lost{[^}]*} $lost\$" <<< "$m" ||
    fail "metrics: $(grep '^pskv_partitions_lost' <<< "$m" || echo 'no pskv_partitions_lost')"
  lp=$(cat "$d/launch.pid")
  wait "$lp"; rc=$?
  [ $rc -ne 0 ] || fail "the job succeeded without the partitions only node $node held whole"
  [ $((SECONDS - t0)) -le $((30 * TS)) ] || fail "the workers took $((SECONDS - t0)) s to fail"
  grep -q 'whose every replica died' "$d"/worker-*.log "$d/launch.out" ||
    fail "no PSKV_ELOST in the workers: $(grep -h 'FAILED' "$d/launch.out" | head -n 2)"
  grep -q "left its chain before its copy to this server was whole" "$other" &&
    fail "the survivor took a partition on without its copy: $(grep -h 'taken on without it' "$other" | head -n 1)"
  echo "$lost partitions lost with node $node (node $snode awaited their copies)"
  return 0
}

tags lease_lapse once serial
f_lease_lapse() {
  local d=$TDIR/c pid wpid spid t0 i k
  launch "$d" --servers 2 --workers 3 --scheduler-opt=--replicas=2 -- --app check \
    --consistency bsp --count-acked --rounds 10000
  wait_joined "$d" 3
  pid=$(cat "$d/server-1.pid")
  wpid=$(cat "$d/worker-0.pid")
  # the server's time-out now; a loaded host's stalls raise it (3 x the longest gap of
  # the last minute) and a pause needs room below the 5 s cap: wait for it (20 s)
  for i in $(seq 20); do
    sleep 1
    t0=$(status_json "$d" | python3 -c 'import json, sys
print(next(x["dead_after_ms"] for x in json.load(sys.stdin)["nodes"] if x.get("pid") == int(sys.argv[1])))' "$pid") ||
      fail "status shows no time-out for server 1"
    [ "$t0" -le 3800 ] && break
  done
  [ "$t0" -le 3800 ] || { echo "server 1's time-out stayed at $t0 ms (load $(cut -d' ' -f1 /proc/loadavg)): no room for a lapse below 5 s"; exit 77; }
  k=$((t0 + 600))
  spid=$(cat "$d/scheduler.pid")
  kill -STOP "$pid" "$wpid"
  sleep 1.7; kill -CONT "$wpid"
  sleep "$(awk -v k=$k 'BEGIN { printf "%.3f", (k - 1700) / 1000 }')"
  # the scheduler held for 0.5 s as the server resumes: its loop takes what waits
  # for it (pulls, forwards) before an acknowledgement can renew the lease (else
  # a race its heartbeat thread often wins); the scheduler's own pause is no one's
  # silence (pause_scheduler)
  kill -STOP "$spid"; kill -CONT "$pid"; sleep 0.5; kill -CONT "$spid"
  wait_line "$d/server-1.log" 'lease lapsed' 1 5 ||
    fail "a pause of $k ms (time-out $t0 ms) did not make server 1's lease lapse: $(grep -i 'lease\|marked dead' "$d"/*.log | tail -n 3)"
  grep -q 'marked dead' "$d/scheduler.log" &&
    fail "the pause of $k ms (time-out $t0 ms before it) declared a death: $(grep 'marked dead' "$d/scheduler.log")"
  # the clocks go on: the slowest worker is further within 5 s
  local before after
  before=$(status_json "$d" | grep -o '"clock":[0-9]*' | cut -d: -f2 | sort -n | head -n 1)
  sleep 5
  after=$(status_json "$d" | grep -o '"clock":[0-9]*' | cut -d: -f2 | sort -n | head -n 1)
  [ "${after:-0}" -gt "${before:-0}" ] ||
    fail "the clocks stopped after the lapse (slowest worker at clock ${before:-?}, 5 s later ${after:-?})"
  wait_ok "$d"
  grep -q 'marked dead' "$d/scheduler.log" && fail "a node was declared dead: $(grep 'marked dead' "$d/scheduler.log")"
  grep -q 'left waiting: [1-9]' "$d"/server-*.log &&
    fail "a server stopped with $(grep -ho 'left waiting: .*' "$d"/server-*.log | head -n 1)"
  echo "paused $k ms (time-out $t0 ms): $(grep -ho 'forwards sent again.*' "$d"/server-*.log | head -n 1)"
  return 0
}

# The scheduler paused (SIGSTOP) for 1.5 s, three times its death time-out, mid-job
# (R = 2): its own blind time is no node's silence. Nobody is declared dead (the
# servers' leases lapse meanwhile and are renewed), and the job ends with exact
# sums. Before, every node was declared dead at once when it resumed, and with
# every worker "done" the job ended.
tags pause_scheduler serial
f_pause_scheduler() {
  local d=$TDIR/c pid
  launch "$d" --servers 3 --workers 3 --scheduler-opt=--replicas=2 -- --app check --count-acked \
    --rounds 3000
  wait_joined "$d" 3
  sleep 0.5
  pid=$(cat "$d/scheduler.pid")
  kill -STOP "$pid"; sleep 1.5; kill -CONT "$pid"
  wait_ok "$d"
  grep -q 'marked dead' "$d/scheduler.log" && fail "nodes declared dead after the scheduler's pause: $(grep -c 'marked dead' "$d/scheduler.log")"
  grep -q 'did not run for' "$d/scheduler.log" || fail "the scheduler did not notice its pause"
  return 0
}

# With R = 1, a killed server's partitions are lost: the workers get a clear
# error naming the partition within seconds, and nothing hangs.
tags lost_partition serial
f_lost_partition() {
  local d=$TDIR/c lp rc t0
  launch "$d" --servers 2 --workers 2 -- --app check --rounds 100000
  wait_joined "$d" 2
  sleep 0.4
  kill -KILL "$(cat "$d/server-0.pid")"
  t0=$SECONDS
  lp=$(cat "$d/launch.pid")
  wait "$lp"; rc=$?
  [ $rc -ne 0 ] || fail "the job succeeded without the data of a dead server"
  [ $((SECONDS - t0)) -le 30 ] || fail "the workers took $((SECONDS - t0)) s to fail"
  grep -q 'whose every replica died' "$d"/worker-*.log "$d/launch.out" ||
    fail "no clear error: $(grep -h 'FAILED' "$d/launch.out" | head -n 2)"
  return 0
}
