# A service (pskv-scheduler --service) and its worker groups: servers that outlive
# the groups, each group's ranks, view, namespace and life, pskvctl stop and shutdown.

# start_service S [FLAGS...]: a service of S servers on a free port ($SVC: its
# address); its processes' pid files in $TDIR.
start_service() {
  local s=$1 i
  shift
  SVC_PORT=$(free_port)
  SVC=127.0.0.1:$SVC_PORT
  start scheduler "$BIN/pskv-scheduler" --port "$SVC_PORT" --servers "$s" --service "$@"
  for i in $(seq 0 $((s - 1))); do
    start "server-$i" "$BIN/pskv-server" --scheduler "$SVC"
  done
  wait_line scheduler.log 'cluster complete' 1 60 || fail "the service did not start"
}

# shutdown_service: pskvctl shutdown, and every process of the service exits 0.
shutdown_service() {
  local f st
  "$BIN/pskvctl" --scheduler "$SVC" shutdown > shutdown.out 2>&1 ||
    fail "pskvctl shutdown: $(cat shutdown.out)"
  grep -q '^shutdown: the servers of service [0-9]* are stopping$' shutdown.out ||
    fail "shutdown said: $(cat shutdown.out)"
  for f in scheduler $(cd "$TDIR" && ls server-*.pid | sed 's/\.pid$//'); do
    wait_exit "$(cat "$f.pid")" 30
    st=$?
    [ "$st" = 0 ] || fail "$f exited $st after shutdown: $(tail -n 2 "$f.log")"
  done
  no_strays "$TDIR"
}

# group NAME SIZE LOGPREFIX [FLAGS...]: starts SIZE workers of group NAME (logs
# LOGPREFIX-R.log, pids LOGPREFIX-R.pid).
group() {
  local name=$1 size=$2 pre=$3 r
  shift 3
  for r in $(seq 0 $((size - 1))); do
    start "$pre-$r" "$BIN/pskv-worker" --scheduler "$SVC" --group "$name" --group-size "$size" \
      --join-timeout 120 "$@"
  done
}

# group_ok LOGPREFIX SIZE PATTERN: each worker exits 0 and its last line matches.
group_ok() {
  local r st
  for r in $(seq 0 $(($2 - 1))); do
    wait_exit "$(cat "$1-$r.pid")" 120
    st=$?
    [ "$st" = 0 ] || fail "$1-$r exited $st: $(tail -n 2 "$1-$r.log")"
    # its result line, wherever it is (a thread's start-up line may come after a short run's)
    grep -q "$3" "$1-$r.log" || fail "$1-$r: $(tail -n 1 "$1-$r.log")"
  done
}

# Two groups at once against one service of 2 servers: each passes check's exact
# sums over its own namespace (its tables are GROUP/check.*) with its own number of
# workers; the servers stay up with no group, a group's name is taken again by a
# new group (bsp, alone, in a namespace it names: A's tables stay), and pskvctl shutdown ends the service, every process 0.
# A worker's own metrics carry its group (group="B").
t_service_groups() {
  local mp
  mp=$(free_port)
  start_service 2
  group A 2 a --app check --rounds 40
  group B 1 b --app check --rounds 40 --metrics-port "$mp" --metrics-linger 20
  wait_line b-0.log '^check ok' 1 120 || fail "group B's worker did not finish: $(tail -n 1 b-0.log)"
  curl -s --max-time 10 "http://127.0.0.1:$mp/metrics" > b-metrics.txt
  grep -q '^pskv_worker_clock{node="[0-9]*",role="worker",rank="0",group="B"} 40' b-metrics.txt ||
    fail "the worker's series do not carry group=\"B\": $(grep '^pskv_worker_clock' b-metrics.txt)"
  kill "$(cat b-0.pid)" # its lingering metrics read: end it now
  group_ok a 2 '^check ok: 2 workers, 2 servers, 40 rounds, async'
  grep -q '^check ok: 1 workers, 2 servers, 40 rounds, async' b-0.log || fail "b-0: $(tail -n 1 b-0.log)"
  wait_line scheduler.log 'group A ended' 1 10 || fail "group A did not end"
  wait_line scheduler.log 'group B ended' 1 10 || fail "group B did not end"
  grep -q "table 'A/check.dense'" server-0.log server-1.log || fail "no table A/check.dense"
  grep -q "table 'B/check.dense'" server-0.log server-1.log || fail "no table B/check.dense"
  "$BIN/pskvctl" --scheduler "$SVC" status > idle.out || fail "status of the idle service"
  grep -q '^job [0-9]*  state running ' idle.out || fail "the idle service: $(head -n 1 idle.out)"
  grep -q '^service: ' idle.out || fail "status does not say service: $(cat idle.out)"
  group A 3 a2 --app check --rounds 20 --consistency bsp --namespace A-bsp
  group_ok a2 3 '^check ok: 3 workers, 2 servers, 20 rounds, bsp'
  shutdown_service
}

# Refusals at registration name the group and the field: a name with '/', a name
# over 64 bytes, a size differing between a group's workers, a rank taken twice; a
# job (no --service) refuses a named group. The service keeps serving: a group
# registered meanwhile completes.
t_service_refusals() {
  start_service 1
  refused() { # refused LOG PATTERN WORKER-FLAGS...
    local log=$1 pat=$2
    shift 2
    "$BIN/pskv-worker" --scheduler "$SVC" --app check --connect-timeout 10 "$@" > "$log" 2>&1 &&
      fail "$log: accepted"
    grep -q "$pat" "$log" || fail "$log: not said: $(tail -n 2 "$log")"
  }
  refused slash.log "group 'a/b'" --group a/b --group-size 1
  refused long.log "group '$(printf 'x%.0s' $(seq 65))'" \
    --group "$(printf 'x%.0s' $(seq 65))" --group-size 1
  start c-0 "$BIN/pskv-worker" --scheduler "$SVC" --group C --group-size 2 --app check \
    --rounds 5 --rank 0 # one of two: C waits
  wait_line scheduler.log 'group C: worker registered' 1 20 || fail "C's first worker"
  refused size.log "group C: field group_size: 3 differs from its workers' (2)" --group C \
    --group-size 3
  refused rank.log "group C: rank 0 is taken by node" --group C --group-size 2 --rank 0
  refused nosize.log "group D: field group_size" --group D
  start c-1 "$BIN/pskv-worker" --scheduler "$SVC" --group C --group-size 2 --app check --rounds 5
  group_ok c 2 '^check ok: 2 workers, 1 servers, 5 rounds'
  shutdown_service
  local port
  port=$(free_port)
  start job "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 1 --join-timeout 30
  SVC=127.0.0.1:$port
  refused job-group.log "group E: field group: this scheduler runs one job" --group E \
    --group-size 1
  "$BIN/pskvctl" --scheduler "$SVC" shutdown > job-shutdown.out 2>&1 && fail "a job shut down"
  grep -q "not a service" job-shutdown.out || fail "shutdown of a job: $(cat job-shutdown.out)"
  kill "$(cat job.pid)"
  wait_exit "$(cat job.pid)" 10 > /dev/null
  no_strays "$TDIR"
}

# Groups sharing a namespace open its tables with the same options. While group A
# holds S/t (dense, width 2, sum, async; pskv-table-open, test/examples/table_open.c),
# groups B to E open it with another width, kind, updater and consistency, and
# pskv-worker's check of group F opens S/check.dense (group P's, async) under bsp:
# each is refused and exits 1, its message naming the group asking, the table, the
# option and the group that opened the table first. A, still running, then pushes
# again and reads exactly its two pushes: nothing lost, the service kept serving.
t_service_ns_mismatch() {
  start_service 2
  group P 1 p --app check --rounds 3 --namespace S
  group_ok p 1 '^check ok: 1 workers, 2 servers, 3 rounds, async'
  local topen=$BIN/pskv-table-open st
  start a "$topen" --scheduler "$SVC" --group A --namespace S --width 2 --push 1.5 \
    --hold "$TDIR/go" --expect 3
  wait_line a.log '^table-open: t pushed, waiting for' 1 60 || fail "group A: $(tail -n 2 a.log)"
  mismatch() { # mismatch GROUP OPTION HAS ASKED FLAGS...: refused, all named
    local g=$1 f=$2 has=$3 asked=$4
    shift 4
    "$topen" --scheduler "$SVC" --group "$g" --namespace S "$@" > "$g.out" 2>&1
    st=$?
    [ "$st" = 1 ] || fail "group $g exited $st: $(cat "$g.out")"
    grep -qF "group $g: table 'S/t' exists with option '$f' = $has, open asked $asked (first opened by group A)" \
      "$g.out" || fail "group $g: $(cat "$g.out")"
  }
  mismatch B width 2 4 --width 4
  mismatch C kind dense sparse --width 2 --kind sparse
  mismatch D updater sum sgd --width 2 --updater sgd
  mismatch E consistency async bsp --width 2 --consistency bsp
  "$BIN/pskv-worker" --scheduler "$SVC" --group F --group-size 1 --namespace S --app check \
    --consistency bsp --connect-timeout 10 > f.log 2>&1
  st=$?
  [ "$st" = 1 ] || fail "group F's check exited $st: $(tail -n 2 f.log)"
  grep -qF "group F: table 'S/check.dense' exists with option 'consistency' = async, open asked bsp (first opened by group P)" \
    f.log || fail "group F: $(tail -n 2 f.log)"
  kill -0 "$(cat a.pid)" 2> /dev/null || fail "group A ended: $(tail -n 2 a.log)"
  touch "$TDIR/go"
  wait_exit "$(cat a.pid)" 60 || fail "group A exited $?: $(tail -n 2 a.log)"
  grep -qx 'table-open ok: t (dense, width 2, sum, async): 100 rows, every value 3' a.log ||
    fail "group A: $(tail -n 1 a.log)"
  shutdown_service
}

# pskvctl stop GROUP ends that group's workers as early stopping does (exit 0, the
# line saying who stopped them), while another group goes on and passes (and has
# its live worker in the metrics, group="K", and each group's ranks their own clock
# lag series); SIGTERM shuts the service down as
# pskvctl shutdown does.
t_service_stop_group() {
  local mport
  mport=$(free_port)
  start_service 2 --metrics-port "$mport"
  group S 2 s --app softmax --epochs 1000 --train-limit 2000 --test-limit 500
  group K 1 k --app check --rounds 800 --slowdown 3
  wait_line scheduler.log 'group S: started' 1 60 || fail "group S did not start"
  sleep 2
  "$BIN/pskvctl" --scheduler "$SVC" stop S > stop.out 2>&1 || fail "pskvctl stop S: $(cat stop.out)"
  grep -q '^stopping group S: 2 workers told$' stop.out || fail "stop said: $(cat stop.out)"
  local r st
  for r in 0 1; do
    wait_exit "$(cat "s-$r.pid")" 60
    st=$?
    [ "$st" = 0 ] || fail "worker $r of S exited $st: $(tail -n 2 "s-$r.log")"
    grep -q "^stopped early at epoch [0-9]*: group S stopped by pskvctl stop from 127.0.0.1" \
      "s-$r.log" || fail "worker $r of S: $(grep -i stop "s-$r.log" | tail -n 2)"
  done
  kill -0 "$(cat k-0.pid)" 2>/dev/null || fail "group K ended with S: $(tail -n 1 k-0.log)"
  "$BIN/pskvctl" --scheduler "$SVC" top --count 1 --plain > top.out || fail "top"
  grep -q '^group name=K state=running workers=1/1 ' top.out || fail "top: $(cat top.out)"
  grep -q '^worker .* group=K$' top.out || fail "top's worker line: $(cat top.out)"
  # the group label of the service's metrics: K has its live worker
  if command -v curl > /dev/null; then
    curl -s "http://127.0.0.1:$mport/metrics" > metrics.out || fail "no metrics"
    grep -q '^pskv_group_workers{.*group="K".*} 1$' metrics.out ||
      fail "no pskv_group_workers of K: $(grep pskv_group metrics.out)"
    # each group's ranks have their own lag series (rank 0 of S and of K apart)
    grep -q '^pskv_worker_clock_lag{.*group="K",worker_rank="0"} 0$' metrics.out ||
      fail "no clock lag of K's rank 0: $(grep pskv_worker_clock_lag metrics.out)"
    grep -q '^pskv_worker_clock_lag{.*group="S",worker_rank="1"} [0-9]' metrics.out ||
      fail "no clock lag of S's rank 1: $(grep pskv_worker_clock_lag metrics.out)"
  fi
  group_ok k 1 '^check ok: 1 workers, 2 servers, 800 rounds'
  kill -TERM "$(cat scheduler.pid)"
  local f
  for f in scheduler server-0 server-1; do
    wait_exit "$(cat "$f.pid")" 30
    st=$?
    [ "$st" = 0 ] || fail "$f exited $st after SIGTERM: $(tail -n 2 "$f.log")"
  done
  grep -q 'service shutdown (signal)' scheduler.log || fail "SIGTERM was not a shutdown"
  no_strays "$TDIR"
}

# rss_fds PIDFILE...: "RSS_KB FDS" summed over the processes.
rss_fds() {
  local f pid rss=0 fds=0 r
  for f in "$@"; do
    pid=$(cat "$f")
    r=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status") || fail "$f gone"
    rss=$((rss + r))
    fds=$((fds + $(ls "/proc/$pid/fd" | wc -l)))
  done
  echo "$rss $fds"
}

# The 64-group loop: 64 groups of 1 worker started and ended one after the other
# against one service leave the resident memory and open files of the service's
# processes (scheduler and 2 servers) flat: within 5% from after 16 groups (the
# warm-up) to the end, each time once the ended groups' workers were forgotten (30 s
# by default, MEMB_FORGET_MS; 5 s here through the test hook PSKV_TEST_FORGET_MS, as in
# forget_replaced). Every group pushes to the same namespace's table, so the servers'
# tables do not grow with the groups.
tags service_64_groups slow
t_service_64_groups() {
  # Under AddressSanitizer (make test's build) freed memory waits in a quarantine of up
  # to 256 MB before it is reused, which reads as growth here: none for this test.
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0:thread_local_quarantine_size_kb=0"
  PSKV_TEST_FORGET_MS=5000 start_service 2
  local i st warm=() end=()
  for i in $(seq 1 64); do
    "$BIN/pskv-worker" --scheduler "$SVC" --group "g$i" --group-size 1 --namespace loop \
      --app bench --size 65536 --steps 5 --warmup 1 --runs 1 > "g$i.log" 2>&1
    st=$?
    [ "$st" = 0 ] || fail "group g$i exited $st: $(tail -n 2 "g$i.log")"
    if [ "$i" = 16 ]; then # the first groups' workers forgotten (g16's is node 18)
      wait_line scheduler.log 'forgetting worker node 18 ' 1 30 || fail "g16's worker not forgotten"
      read -r -a warm <<< "$(rss_fds scheduler.pid server-0.pid server-1.pid)"
    fi
  done
  wait_line scheduler.log 'forgetting worker node 66 ' 1 30 || fail "the last worker not forgotten"
  read -r -a end <<< "$(rss_fds scheduler.pid server-0.pid server-1.pid)"
  echo "after 16 groups: rss ${warm[0]} KB, ${warm[1]} fds; after 64: rss ${end[0]} KB, ${end[1]} fds"
  [ $((end[0] * 100)) -le $((warm[0] * 105)) ] ||
    fail "resident memory grew from ${warm[0]} to ${end[0]} KB over 48 groups"
  [ $((end[1] * 100)) -le $((warm[1] * 105)) ] ||
    fail "open files grew from ${warm[1]} to ${end[1]} over 48 groups"
  [ "$(grep -c 'ended after' scheduler.log)" = 64 ] || fail "not 64 groups ended"
  "$BIN/pskvctl" --scheduler "$SVC" status --json > st.json || fail "status"
  python3 -c 'import json,sys; v=json.load(open("st.json")); sys.exit(len(v["groups"]) != 0)' ||
    fail "groups left in status: $(cat st.json)"
  shutdown_service
}

# A bsp group and an async group at once on one service of 2 servers: each worker
# has its own clock slot on the servers, and a bsp table of namespace A closes its
# clocks on group A's workers alone. A passes check's exact sums (every pull at
# clock c exactly the sums of rounds < c), then group C under ssp:1 (its bound read
# from C's workers' clocks), while B's slow worker (2 s a round) is still below
# clock 100 (status): neither waited for B (with one clock set A could not end
# before B's clock 100, 200 s on). B, killed mid-run
# (-9), ends as a group and the service goes on.
t_service_bsp_async() {
  start_service 2
  group B 1 b --app check --rounds 100000 --slowdown 400 --consistency async
  wait_line scheduler.log 'group B: started' 1 60 || fail "group B did not start"
  group A 2 a --app check --rounds 100 --consistency bsp
  group_ok a 2 '^check ok: 2 workers, 2 servers, 100 rounds, bsp'
  group C 2 c --app check --rounds 100 --consistency ssp:1 # ssp's bound is C's too
  group_ok c 2 '^check ok: 2 workers, 2 servers, 100 rounds, ssp:1'
  kill -0 "$(cat b-0.pid)" 2> /dev/null || fail "B's worker ended: $(tail -n 2 b-0.log)"
  "$BIN/pskvctl" --scheduler "$SVC" status --json > st.json || fail "status"
  local clock
  clock=$(python3 -c 'import json; print([g["clock"] for g in json.load(open("st.json"))["groups"] if g["name"] == "B"][0])') ||
    fail "no group B in status: $(cat st.json)"
  [ "$clock" -lt 100 ] || fail "B's worker is at clock $clock: A's bsp clocks may have waited for it"
  kill -KILL "$(cat b-0.pid)"
  wait_line scheduler.log 'group B ended' 1 30 || fail "group B did not end when its worker died"
  grep -q 'group B ended .* 0 workers finished, 1 dead' scheduler.log ||
    fail "B's end: $(grep 'group B ended' scheduler.log)"
  shutdown_service
}

# pyworker NAME GROUP SIZE ROUNDS VALUE: a Python worker of GROUP (of SIZE) that
# pushes VALUE to every key of the sum table shared/sum ROUNDS times, each push
# acknowledged; ROUNDS 0: pulls it and prints "sum MIN MAX" over the keys. The
# package loads build/lib/libpskv.so (the plain build: an ASan library cannot be
# loaded into python3).
pyworker() {
  start "$1" env PYTHONPATH="$top/python" PSKV_LIB="$top/build/lib/libpskv.so" \
    /usr/bin/python3 -c '
import sys, numpy as np, pskv
svc, group, size, rounds, value = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
with pskv.Worker(scheduler=svc, group=group, group_size=size, table_namespace="shared") as w:
    t = w.table("sum", size=1000, updater="sum", consistency="async")
    g = np.full(1000, value, np.float32)
    for _ in range(rounds):
        t.push(g).wait(timeout=60)
    if rounds == 0:
        out = np.empty(1000, np.float32)
        t.pull(out=out).wait(timeout=60)
        print("sum %g %g" % (out.min(), out.max()))
    else:
        print("pushed %d x %g" % (rounds, value))
' "$SVC" "$2" "$3" "$4" "$5"
}

# Two groups sharing one namespace (--namespace shared) with a sum table, at once:
# the final values are the sum of both groups' pushes, exactly, as a third group
# reading the namespace after they ended finds (the namespace outlives them).
t_service_shared_ns() {
  command -v /usr/bin/python3 > /dev/null && /usr/bin/python3 -c 'import numpy' 2> /dev/null ||
    { echo "no numpy for /usr/bin/python3"; return 77; }
  [ -f "$top/build/lib/libpskv.so" ] || { echo "no build/lib/libpskv.so (make all)"; return 77; }
  start_service 2
  pyworker a-0 A 2 50 1
  pyworker a-1 A 2 50 1
  pyworker b-0 B 1 30 3
  local f st
  for f in a-0 a-1 b-0; do
    wait_exit "$(cat "$f.pid")" 120
    st=$?
    [ "$st" = 0 ] || fail "$f exited $st: $(tail -n 3 "$f.log")"
  done
  wait_line scheduler.log 'group A ended' 1 10 || fail "group A did not end"
  wait_line scheduler.log 'group B ended' 1 10 || fail "group B did not end"
  pyworker r-0 R 1 0 0
  wait_exit "$(cat r-0.pid)" 60 || fail "the reader: $(tail -n 3 r-0.log)"
  grep -qx 'sum 190 190' r-0.log || fail "2 x 50 x 1 + 30 x 3 = 190 expected: $(tail -n 1 r-0.log)"
  shutdown_service
}

# With keys, pskvctl shutdown, stop GROUP and drop NAMESPACE need a control key: a worker key is
# refused (exit 1, the reason named) and the service keeps serving; the control
# key shuts it down.
tags service_keys keys
t_service_keys() {
  local K=$TDIR/keys
  "$BIN/pskvctl" keys init "$K" --servers 1 --workers 1 > /dev/null || fail "keys init"
  SVC_PORT=$(free_port)
  SVC=127.0.0.1:$SVC_PORT
  start scheduler "$BIN/pskv-scheduler" --port "$SVC_PORT" --servers 1 --service \
    --keys "$K/scheduler"
  start server-0 "$BIN/pskv-server" --scheduler "$SVC" --keys "$K/server-0"
  wait_line scheduler.log 'cluster complete' 1 60 || fail "the service did not start"
  "$BIN/pskvctl" --scheduler "$SVC" --keys "$K/worker-0" shutdown > w.out 2>&1 &&
    fail "a worker key shut the service down"
  grep -q 'shutdown needs a control key' w.out || fail "not said: $(cat w.out)"
  "$BIN/pskvctl" --scheduler "$SVC" --keys "$K/worker-0" stop A > w.out 2>&1 &&
    fail "a worker key stopped a group"
  grep -q 'stop GROUP needs a control key' w.out || fail "not said: $(cat w.out)"
  "$BIN/pskvctl" --scheduler "$SVC" --keys "$K/worker-0" drop A > w.out 2>&1 &&
    fail "a worker key dropped a namespace"
  grep -q 'drop NAMESPACE needs a control key' w.out || fail "not said: $(cat w.out)"
  "$BIN/pskvctl" --scheduler "$SVC" --keys "$K/control" status > st.out ||
    fail "the service stopped serving: $(cat st.out)"
  "$BIN/pskvctl" --scheduler "$SVC" --keys "$K/control" shutdown > shutdown.out 2>&1 ||
    fail "the control key: $(cat shutdown.out)"
  local f st
  for f in scheduler server-0; do
    wait_exit "$(cat "$f.pid")" 30
    st=$?
    [ "$st" = 0 ] || fail "$f exited $st after shutdown: $(tail -n 2 "$f.log")"
  done
}

# server_bytes: the table bytes each server's heartbeat reports (status --json), "B0 B1 ...".
server_bytes() {
  "$BIN/pskvctl" --scheduler "$SVC" status --json > sb.json || fail "status"
  python3 -c 'import json; print(" ".join(str(n.get("bytes", 0)) for n in json.load(open("sb.json"))["nodes"] if n["role"] == "server"))'
}

# ns_width GROUP NS WIDTH: test/tools/ns_width.py (a fresh NS/w of WIDTH, one push exact).
ns_width() {
  env PSKV_LIB="$top/build/lib/libpskv.so" timeout 120 /usr/bin/python3 \
    "$top/test/tools/ns_width.py" "$SVC" "$@"
}

# pskvctl drop NAMESPACE after its groups ended, on 2 servers at R = 2: every
# replica frees the namespace's tables (both servers log it, their table bytes in
# status go to 0 and, outside ASan, a server's resident memory falls by at least a
# quarter of what it held), its status line goes, and the same names open afresh:
# NS/w at another width (refused while the old table stood) starts from zero, and
# check's tables with another size pass their exact sums. A checkpoint after the
# drop holds none of them: the server writes a full one, not a delta.
t_service_ns_drop() {
  local py=1 # the width checks need numpy and the plain build's library
  /usr/bin/python3 -c 'import numpy' 2> /dev/null && [ -f "$top/build/lib/libpskv.so" ] ||
    { py=0; echo "note: no numpy for /usr/bin/python3 or no build/lib/libpskv.so: width checks skipped"; }
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0:thread_local_quarantine_size_kb=0"
  mkdir -p "$TDIR/sched" "$TDIR/d0" "$TDIR/d1" "$TDIR/d2"
  SVC_PORT=$(free_port)
  SVC=127.0.0.1:$SVC_PORT
  start scheduler "$BIN/pskv-scheduler" --port "$SVC_PORT" --servers 2 --service --replicas 2 \
    --data-dir "$TDIR/sched" --full-every 10
  local i mport
  mport=$(free_port)
  for i in 0 1 2; do # server-2 joins the running service: copies reach it
    start "server-$i" "$BIN/pskv-server" --scheduler "$SVC" --data-dir "$TDIR/d$i" \
      $([ $i = 0 ] && echo --metrics-port "$mport")
    [ $i = 1 ] && { wait_line scheduler.log 'cluster complete' 1 60 || fail "no service"; }
  done
  wait_line scheduler.log 'server node [0-9]* joined the running job' 1 30 || fail "no join"
  group A 1 a --app check --rounds 3 --check-keys 300000
  group_ok a 1 '^check ok: 1 workers, 3 servers, 3 rounds'
  local tables=2
  if [ $py = 1 ]; then
    tables=3
    ns_width P A 3 > w3.out 2>&1 || fail "width 3: $(cat w3.out)"
    ns_width P A 5 > w5.out 2>&1 && fail "A/w reopened at width 5 before the drop"
    grep -q "table 'A/w' exists with option 'width' = 3, open asked 5" w5.out || fail "$(cat w5.out)"
  fi
  "$BIN/pskvctl" --scheduler "$SVC" checkpoint --delta > ck1.out 2>&1 || fail "checkpoint: $(cat ck1.out)"
  "$BIN/pskvctl" --scheduler "$SVC" status > before.out || fail "status"
  grep -q '^namespace A: [1-9][0-9]* bytes on 3 servers' before.out ||
    fail "no namespace A: $(grep namespace before.out)"
  local rss0 rss1 freed bytes
  if command -v curl > /dev/null; then # server-0's namespace gauge: its bytes, then 0
    for i in $(seq 50); do
      curl -s "http://127.0.0.1:$mport/metrics" > m1.txt
      grep -q '^pskv_namespace_bytes{.*namespace="A"} [1-9]' m1.txt && break
      sleep 0.1
    done
    grep -q '^pskv_namespace_bytes{.*namespace="A"} [1-9]' m1.txt || fail "no bytes of A in metrics"
  fi
  rss0=$(awk '/^VmRSS:/ { print $2 }' "/proc/$(cat server-0.pid)/status")
  "$BIN/pskvctl" --scheduler "$SVC" drop A > drop.out 2>&1 || fail "drop A: $(cat drop.out)"
  grep -qE "^dropped namespace A: $((3 * tables)) tables, [1-9][0-9]* rows, [1-9][0-9]* bytes freed \(every replica\)$" \
    drop.out || fail "drop said: $(cat drop.out)"
  freed=$(sed -E 's/.* rows, ([0-9]+) bytes.*/\1/' drop.out)
  for i in 0 1 2; do
    grep -q "namespace 'A' dropped: $tables tables" "server-$i.log" || fail "server-$i kept A"
  done
  for i in $(seq 50); do
    bytes=$(server_bytes)
    [ "$bytes" = "0 0 0" ] && break
    sleep 0.1
  done
  [ "$bytes" = "0 0 0" ] || fail "the servers' table bytes after the drop: $bytes"
  if command -v curl > /dev/null; then
    curl -s "http://127.0.0.1:$mport/metrics" > m2.txt
    grep -q '^pskv_namespace_bytes{.*namespace="A"} 0$' m2.txt ||
      fail "A's bytes in metrics after the drop: $(grep 'namespace="A"' m2.txt)"
  fi
  "$BIN/pskvctl" --scheduler "$SVC" status > after.out || fail "status"
  grep -q '^namespace A' after.out && fail "status still lists A: $(grep namespace after.out)"
  rss1=$(awk '/^VmRSS:/ { print $2 }' "/proc/$(cat server-0.pid)/status")
  echo "server-0 rss $rss0 -> $rss1 KB; $freed bytes freed over 3 servers"
  if ! ldd "$BIN/pskv-server" | grep -q libasan; then
    [ $(((rss0 - rss1) * 1024 * 12)) -ge "$freed" ] ||
      fail "server-0's memory fell from $rss0 to $rss1 KB only ($freed bytes freed on 3 servers)"
  fi
  if [ $py = 1 ]; then
    ns_width P A 5 > w5b.out 2>&1 || fail "width 5 after the drop: $(cat w5b.out)"
  fi
  group A 1 a2 --app check --rounds 3 --check-keys 5000
  group_ok a2 1 '^check ok: 1 workers, 3 servers, 3 rounds, async, 5000 dense'
  "$BIN/pskvctl" --scheduler "$SVC" checkpoint --delta > ck2.out 2>&1 || fail "checkpoint: $(cat ck2.out)"
  grep -q "namespace 'A' was dropped since checkpoint 1" server-2.log ||
    fail "server-2 wrote a delta over a file with A's old tables: $(grep 'checkpoint 2' server-2.log)"
  shutdown_service
}

# A drop while a server joins: server-0's copy to the joiner is held back 4 s
# (PSKV_TEST_FILL_DELAY_MS), so the drop asked meanwhile waits for the copy to be
# whole before NS_DROP goes out; the joiner, which got the namespace's tables by the
# copy, frees them too, and nothing brings them back (both servers' table bytes
# stay 0, status lists no X).
t_service_ns_drop_join() {
  SVC_PORT=$(free_port)
  SVC=127.0.0.1:$SVC_PORT
  start scheduler "$BIN/pskv-scheduler" --port "$SVC_PORT" --servers 1 --service
  start server-0 env PSKV_TEST_FILL_DELAY_MS=4000 "$BIN/pskv-server" --scheduler "$SVC"
  wait_line scheduler.log 'cluster complete' 1 60 || fail "the service did not start"
  group X 1 x --app check --rounds 3
  group_ok x 1 '^check ok: 1 workers, 1 servers, 3 rounds'
  start server-1 "$BIN/pskv-server" --scheduler "$SVC"
  wait_line scheduler.log 'server node [0-9]* joined the running job' 1 30 || fail "no join"
  "$BIN/pskvctl" --scheduler "$SVC" drop X > drop.out 2>&1 || fail "drop X: $(cat drop.out)"
  grep -q '^dropped namespace X: 4 tables' drop.out || fail "said: $(cat drop.out)"
  grep -q "dropping namespace 'X' .* waits for the copies" scheduler.log ||
    echo "note: the copy was whole before the drop was asked (a loaded machine)"
  grep -q "namespace 'X' dropped: 2 tables" server-1.log || fail "the joiner: $(grep -i "namespace 'X'" server-1.log)"
  sleep 1 # a copy that came late would have recreated the tables by now
  local bytes
  bytes=$(server_bytes)
  [ "$bytes" = "0 0" ] || fail "the servers' table bytes after the drop: $bytes"
  "$BIN/pskvctl" --scheduler "$SVC" status | grep -q '^namespace X' && fail "status lists X"
  shutdown_service
}

# Readers (pskv-serve) follow namespaces R and Q when R is dropped: the server
# unsubscribes R's reader (its renewals are refused: no table; it keeps serving the
# last copy it has), Q's reader goes on being served and Q's tables stay.
t_service_ns_drop_reader() {
  command -v curl > /dev/null || { echo "no curl"; return 77; }
  start_service 1
  group R 1 r --app check --rounds 3
  group Q 1 q --app check --rounds 3
  group_ok r 1 '^check ok'
  group_ok q 1 '^check ok'
  local hr hq i
  hr=$(free_port)
  hq=$(free_port)
  start follow-r "$BIN/pskv-serve" --scheduler "$SVC" --namespace R --http-port "$hr"
  start follow-q "$BIN/pskv-serve" --scheduler "$SVC" --namespace Q --http-port "$hq"
  for i in $(seq 300); do
    curl -sf "http://127.0.0.1:$hr/v1/model" | grep -q '"table":"check.dense"' &&
      curl -sf "http://127.0.0.1:$hq/v1/model" | grep -q '"table":"check.dense"' && break
    sleep 0.1
  done
  curl -sf "http://127.0.0.1:$hr/v1/model" | grep -q '"table":"check.dense"' || fail "R not served"
  "$BIN/pskvctl" --scheduler "$SVC" drop R > drop.out 2>&1 || fail "drop R: $(cat drop.out)"
  grep -q "namespace 'R' dropped: a reader following it unsubscribed" server-0.log ||
    fail "R's reader: $(grep -i reader server-0.log)"
  wait_line follow-r.log 'refused to be followed' 1 10 || fail "R's reader: $(tail -n 2 follow-r.log)"
  curl -sf "http://127.0.0.1:$hr/v1/model" | grep -q '"table":"check.dense"' ||
    fail "R's reader stopped serving its last copy"
  curl -sf "http://127.0.0.1:$hq/v1/model" | grep -q '"table":"check.dense"' || fail "Q not served"
  grep -q "refused" follow-q.log && fail "Q's reader was refused: $(grep refused follow-q.log)"
  "$BIN/pskvctl" --scheduler "$SVC" status | grep -q '^namespace Q:' || fail "Q went with R"
  kill "$(cat follow-r.pid)" "$(cat follow-q.pid)"
  wait_exit "$(cat follow-r.pid)" 10 > /dev/null
  wait_exit "$(cat follow-q.pid)" 10 > /dev/null
  shutdown_service
}

# pskvctl drop is refused, exit 1, naming the namespace: while a live group uses it
# (opened tables in it, or is named after it; the group's name given), an unknown
# name, a name with '/'; the service keeps serving and the group's tables stay;
# once the group ended (its worker killed), the drop goes. A job refuses to drop
# its unnamed namespace. No argument: usage, exit 2.
t_service_ns_drop_refused() {
  start_service 1
  group B 1 b --app check --rounds 100000 --slowdown 50
  wait_line scheduler.log 'group B: started' 1 60 || fail "group B did not start"
  local i
  for i in $(seq 100); do # its tables are open once the server lists namespace B
    "$BIN/pskvctl" --scheduler "$SVC" status | grep -q '^namespace B:' && break
    sleep 0.1
  done
  "$BIN/pskvctl" --scheduler "$SVC" drop B > busy.out 2>&1 && fail "dropped B while it runs"
  grep -q "namespace 'B' is in use by live group B" busy.out || fail "said: $(cat busy.out)"
  "$BIN/pskvctl" --scheduler "$SVC" drop nope > nope.out 2>&1 && fail "dropped nope"
  grep -q "namespace 'nope' does not exist" nope.out || fail "said: $(cat nope.out)"
  "$BIN/pskvctl" --scheduler "$SVC" drop a/b > slash.out 2>&1 && fail "dropped a/b"
  grep -q "namespace 'a/b' is not a namespace name" slash.out || fail "said: $(cat slash.out)"
  "$BIN/pskvctl" --scheduler "$SVC" drop > usage.out 2>&1
  [ $? = 2 ] || fail "drop without a name: $(cat usage.out)"
  "$BIN/pskvctl" --scheduler "$SVC" status | grep -q '^namespace B:' || fail "B's tables went"
  kill -0 "$(cat b-0.pid)" 2> /dev/null || fail "B's worker ended: $(tail -n 2 b-0.log)"
  kill -KILL "$(cat b-0.pid)"
  wait_line scheduler.log 'group B ended' 1 30 || fail "group B did not end"
  "$BIN/pskvctl" --scheduler "$SVC" drop B > drop.out 2>&1 || fail "drop B: $(cat drop.out)"
  grep -q '^dropped namespace B: 2 tables' drop.out || fail "said: $(cat drop.out)"
  shutdown_service
  local port
  port=$(free_port)
  start job "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 1 --join-timeout 30
  wait_line job.log 'listening on port' 1 10 || fail "the job's scheduler did not start"
  "$BIN/pskvctl" --scheduler "127.0.0.1:$port" drop "" > job.out 2>&1 && fail "a job dropped ''"
  grep -q "the unnamed namespace is job [0-9]*'s own" job.out || fail "said: $(cat job.out)"
  kill "$(cat job.pid)"
  wait_exit "$(cat job.pid)" 10 > /dev/null
  no_strays "$TDIR"
}

# pskv-worker --drop-namespace: the group's namespace goes when the group ends
# (the servers free its bsp tables; a new group opening them finds them fresh), but
# only when no other live group uses it: a group sharing namespace S with one still
# running keeps S.
t_service_ns_drop_flag() {
  start_service 1
  group D 1 d --app check --rounds 5 --consistency bsp --drop-namespace
  group_ok d 1 '^check ok: 1 workers, 1 servers, 5 rounds, bsp'
  wait_line scheduler.log "namespace 'D' dropped (group D ended with --drop-namespace): 3 tables" 1 20 ||
    fail "D's namespace not dropped: $(grep -i namespace scheduler.log)"
  grep -q "namespace 'D' dropped: 3 tables" server-0.log || fail "the server kept D"
  # the same bsp tables again, fresh (clocks from 0, values from 0: check's exact sums)
  group D2 2 d2 --app check --rounds 5 --consistency bsp --namespace D
  group_ok d2 2 '^check ok: 2 workers, 1 servers, 5 rounds, bsp'
  group F 1 f --app bench --size 4096 --steps 100000000 --warmup 0 --runs 1 --namespace S
  wait_line scheduler.log 'group F: started' 1 60 || fail "group F did not start"
  group E 1 e --app check --rounds 5 --namespace S --drop-namespace
  group_ok e 1 '^check ok: 1 workers, 1 servers, 5 rounds'
  wait_line scheduler.log "group E ended with --drop-namespace: namespace 'S' kept: namespace 'S' is in use by live group F" 1 20 ||
    fail "S: $(grep -i "namespace 'S'" scheduler.log)"
  grep -q "namespace 'S' dropped" server-0.log && fail "the server dropped S while F uses it"
  kill -KILL "$(cat f-0.pid)"
  wait_line scheduler.log 'group F ended' 1 30 || fail "group F did not end"
  "$BIN/pskvctl" --scheduler "$SVC" status | grep -q '^namespace S:' || fail "S went with F"
  shutdown_service
}
