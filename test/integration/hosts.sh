# Several hosts (sourced by integration.sh): network namespaces with their own sshd
# (scripts/netns-cluster.sh), launched over ssh; they need root.

# ---- several hosts: network namespaces with their own sshd -----------------------
NETNS=$top/scripts/netns-cluster.sh
HOSTS_LAUNCH=$top/scripts/launch-hosts.sh
NETNS_SSH=(--ssh-opt -F --ssh-opt /tmp/pskv-netns/ssh_config)

# Brings up N namespaced hosts; returns 77 (skip) without root, unless CI=true.
netns_up() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "multi-host tests skipped: network namespaces need root"
    [ "${CI:-}" = true ] && return 1
    return 77
  fi
  # one set of namespaced hosts per machine: a chaos soak or another run's test would
  # have them torn down under it. The lock is held until this test's shell exits.
  exec {NETNS_LOCK_FD}>> /tmp/pskv-netns-user.lock
  flock -w 900 "$NETNS_LOCK_FD" ||
    { echo "the namespaced hosts stayed in use by another run (/tmp/pskv-netns-user.lock) for 900 s"; return 1; }
  "$NETNS" up "$1" > netns.out 2>&1 && return 0
  cat netns.out
  return 1
}

no_pskv_in_hosts() { # no pskv daemon left in any namespaced host
  local h pids
  for h in "$@"; do
    pids=$(ip netns pids "pskv-$h" 2>/dev/null | xargs -r ps -o comm= -p 2>/dev/null | grep -c '^pskv-' || true)
    [ "${pids:-0}" -eq 0 ] || fail "pskv processes left on $h: $(ip netns pids "pskv-$h" | xargs -r ps -o pid=,args= -p)"
  done
}

# The key directories a launch-hosts run said it used (its stderr in FILE): the per-run
# directory on the hosts and, for a keyset it made, its private directory here.
run_key_dirs() { # run_key_dirs FILE
  grep '^launch-hosts: keys:' "$1" |
    grep -o -e '/tmp/pskv-keys-[0-9][0-9-]*[0-9]' -e '/tmp/pskv-keys-local-[A-Za-z0-9]*' | sort -u
}

keys_gone() { # keys_gone FILE HOST...: after the run, its keys are on no host and not here
  local dirs d h file=$1
  dirs=$(run_key_dirs "$1")
  [ "$(wc -w <<< "$dirs")" -eq 2 ] || fail "the launcher did not say where the keys went: $(grep launch-hosts "$1")"
  shift
  for d in $dirs; do
    [ ! -e "$d" ] || fail "keys left here in $d after the launcher exited"
    for h in "$@"; do
      "$NETNS" exec "$h" test ! -e "$d" || fail "keys left on $h in $d after the launcher exited"
    done
  done
  d=$(sed -n 's/^launch-hosts: logs in //p' "$file")
  [ -n "$d" ] && [ ! -e "$d/keys" ] && [ ! -L "$d/keys" ] || fail "the link to the keyset is still in the log dir ($d)"
}

tags hosts_check root keys slow
t_hosts_check() {
  # 3 hosts, the cluster started over ssh by launch-hosts.sh, exact sums across hosts,
  # and the launcher's stop leaves nothing behind on any host: no daemon, no key. With
  # keys (the default: made for the job, each daemon given its own), then --insecure.
  netns_up 3; local rc=$?
  [ $rc -eq 77 ] && return 77
  [ $rc -eq 0 ] || fail "cannot create the namespaced hosts"
  trap '"$NETNS" down > /dev/null 2>&1' EXIT
  printf '%s\n' '# three namespaced hosts' 'h1 scheduler servers=1 workers=1' \
    'h2 servers=1 workers=1   # a comment' 'h3 workers=1' > hosts
  "$HOSTS_LAUNCH" --hostfile hosts "${NETNS_SSH[@]}" --bin-dir "$BIN" --timeout 150 \
    --log-dir "$TDIR/logs" -- --app check --rounds 5 > launch.out 2>&1 ||
    { cat launch.out; fail "launch-hosts exited $?"; }
  for r in 0 1 2; do
    grep -q '^check ok:' "$TDIR/logs/worker-$r.log" || fail "worker $r: $(tail -n 2 "$TDIR/logs/worker-$r.log")"
  done
  grep -q '10.213.0.1[123]' "$TDIR/logs/scheduler.log" || fail "the scheduler saw no namespaced addresses"
  local remote d
  remote=$(run_key_dirs launch.out | grep -v local)
  for d in scheduler server-0 server-1 worker-0 worker-1 worker-2; do
    grep -q "settings: .* keys=$remote/$d insecure=0" "$TDIR/logs/$d.log" ||
      fail "$d did not run with its own keys from $remote: $(grep settings "$TDIR/logs/$d.log")"
  done
  ! grep -q 'running with --insecure' "$TDIR"/logs/*.log || fail "a daemon ran with --insecure by default"
  keys_gone launch.out h1 h2 h3
  no_pskv_in_hosts h1 h2 h3
  # --insecure: no keys anywhere, the same exact sums, and every daemon warns
  "$HOSTS_LAUNCH" --hostfile hosts "${NETNS_SSH[@]}" --bin-dir "$BIN" --timeout 150 --insecure \
    --log-dir "$TDIR/logs-insecure" -- --app check --rounds 5 > launch-insecure.out 2>&1 ||
    { cat launch-insecure.out; fail "launch-hosts --insecure exited $?"; }
  for d in scheduler server-0 server-1 worker-0 worker-1 worker-2; do
    grep -q 'running with --insecure: no authentication' "$TDIR/logs-insecure/$d.log" ||
      fail "$d did not warn that it runs with --insecure"
    grep -q 'settings: .* keys= insecure=1' "$TDIR/logs-insecure/$d.log" || fail "$d ran with keys under --insecure"
  done
  for r in 0 1 2; do
    grep -q '^check ok:' "$TDIR/logs-insecure/worker-$r.log" || fail "insecure worker $r: $(tail -n 2 "$TDIR/logs-insecure/worker-$r.log")"
  done
  [ -z "$(run_key_dirs launch-insecure.out)" ] || fail "keys were copied under --insecure"
  no_pskv_in_hosts h1 h2 h3
  # a daemon that would advertise loopback to other hosts says so and stops
  printf '%s\n' 'h1 scheduler servers=1' 'h2 workers=1 advertise=127.0.0.1' > badhosts
  "$HOSTS_LAUNCH" --hostfile badhosts "${NETNS_SSH[@]}" --bin-dir "$BIN" --timeout 60 \
    --log-dir "$TDIR/logs2" -- --app check > /dev/null 2>&1 && fail "a loopback advertise was accepted"
  grep -q 'loopback' "$TDIR/logs2/worker-0.log" || fail "no loopback error: $(tail -n 2 "$TDIR/logs2/worker-0.log")"
  no_pskv_in_hosts h1 h2 h3
}

tags hosts_delay root keys
t_hosts_delay() {
  # 100 ms added each way between the workers and the server (a fault proxy in front
  # of the server on h2): exact sums hold
  netns_up 3; local rc=$?
  [ $rc -eq 77 ] && return 77
  [ $rc -eq 0 ] || fail "cannot create the namespaced hosts"
  trap '"$NETNS" down > /dev/null 2>&1' EXIT
  "$NETNS" exec h2 "$BIN/pskv-faultproxy" --listen 10.213.0.12:7900 --target 10.213.0.12:7800 \
    --delay-ms 100 > proxy.log 2>&1 &
  printf '%s\n' 'h1 scheduler workers=1' 'h2 servers=1 port=7800' 'h3 workers=2' > hosts
  local t0=$SECONDS
  "$HOSTS_LAUNCH" --hostfile hosts "${NETNS_SSH[@]}" --bin-dir "$BIN" --timeout 150 \
    --log-dir "$TDIR/logs" --server-opt --advertise-port --server-opt 7900 -- --app check \
    --rounds 3 --check-keys 200 > launch.out 2>&1 || { cat launch.out; fail "launch-hosts exited $?"; }
  for r in 0 1 2; do
    grep -q '^check ok:' "$TDIR/logs/worker-$r.log" || fail "worker $r: $(tail -n 2 "$TDIR/logs/worker-$r.log")"
  done
  grep -q 'advertised as 10.213.0.12:7900' "$TDIR/logs/server-0.log" || fail "the server did not advertise the proxy"
  echo "check across a 100 ms delay took $((SECONDS - t0)) s"
  [ $((SECONDS - t0)) -ge 2 ] || fail "the run was too fast for a 100 ms delay: the proxy was not in the path"
  grep -q 'keys=/tmp/pskv-keys-[0-9-]*/server-0 insecure=0' "$TDIR/logs/server-0.log" ||
    fail "the server behind the proxy ran without keys"
  keys_gone launch.out h1 h2 h3
  pkill -f 'pskv-faultproxy --listen 10.213.0.12:7900'
  sleep 0.2
  no_pskv_in_hosts h1 h2 h3
}

# While a keyed run goes on (launcher's stderr in FILE, log dir LOG): the scheduler
# answers pskvctl with the control key (linked from the log dir) and says CURVE is on;
# the hosts hold only their daemons' key directories, 0700, secret keys 0600.
keys_while_running() { # keys_while_running FILE LOG
  local js remote d
  js=$("$BIN/pskvctl" --scheduler 10.213.0.11:7700 --keys "$2/keys/control" --timeout 5 status --json) ||
    fail "pskvctl with $2/keys/control got no status"
  grep -q '"keys":true' <<< "$js" || fail "the scheduler does not say CURVE is on: $js"
  remote=$(run_key_dirs "$1" | grep -v local)
  [ -n "$remote" ] || fail "the launcher did not say where the keys went"
  [ "$(ls "$remote" | tr '\n' ' ')" = "scheduler server-0 server-1 worker-0 worker-1 worker-2 " ] ||
    fail "the hosts got other keys than their daemons': $(ls "$remote")"
  [ "$(stat -c %a "$remote")" = 700 ] || fail "$remote is mode $(stat -c %a "$remote")"
  for d in "$remote"/*; do
    [ "$(stat -c %a "$d")/$(stat -c %a "$d/node.key")" = 700/600 ] ||
      fail "$d is mode $(stat -c %a "$d"), its node.key $(stat -c %a "$d/node.key")"
  done
}

partition_run() { # partition_run MODEL: cut worker 2's host for 5 s mid-run, then heal
  local model=$1 log=$TDIR/logs-${1//:/-}
  "$HOSTS_LAUNCH" --hostfile hosts "${NETNS_SSH[@]}" --bin-dir "$BIN" --timeout 150 \
    --log-dir "$log" -- --app check --consistency "$model" --count-acked --rounds 1000 \
    --check-keys 100 --slowdown 3 > "launch-$model.out" 2>&1 &
  local lpid=$! i
  for i in $(seq 200); do grep -q 'joined job' "$log/worker-2.log" 2>/dev/null && break; sleep 0.1; done
  sleep 1
  "$NETNS" cut h3 || fail "cut failed"
  keys_while_running "launch-$model.out" "$log"
  sleep 5
  "$NETNS" heal h3 || fail "heal failed"
  local heal_at
  heal_at=$(date +%s.%N)
  grep -q 'rank 2 .*marked dead' "$log/scheduler.log" || fail "$model: the cut worker was not declared dead"
  kill -0 "$(cat "$log/worker-0.pid")" || fail "$model: worker 0 finished during the cut: the run is too short to see the rejoin"
  wait $lpid || { cat "launch-$model.out"; fail "$model: launch-hosts exited $?"; }
  for r in 0 1 2; do
    grep -q '^check ok:' "$log/worker-$r.log" || fail "$model worker $r: $(tail -n 2 "$log/worker-$r.log")"
  done
  grep -q 'alive again' "$log/scheduler.log" || fail "$model: the cut worker did not come back"
  keys_gone "launch-$model.out" h1 h2 h3
  # rejoin time: from the heal to the scheduler seeing it alive again (wall clock of the log)
  local back
  back=$(grep 'alive again' "$log/scheduler.log" | tail -n 1 | awk '{print $1}')
  awk -v h="$heal_at" -v b="$(date -d "$back" +%s.%N)" -v m="$model" 'BEGIN { printf "%s: rejoin %.2f s after the heal\n", m, b - h; exit !(b - h < 30) }' ||
    fail "$model: rejoin took 30 s or more"
}

tags hosts_partition root keys slow
t_hosts_partition() {
  # cut worker 2's host off for 5 s, then heal it: the others keep going (async and ssp:
  # the cut worker is declared dead and leaves the clock set), it comes back alive,
  # rejoins the clock set and finishes with exact accounting
  netns_up 3; local rc=$?
  [ $rc -eq 77 ] && return 77
  [ $rc -eq 0 ] || fail "cannot create the namespaced hosts"
  trap '"$NETNS" down > /dev/null 2>&1' EXIT
  printf '%s\n' 'h1 scheduler servers=1 workers=1' 'h2 servers=1 workers=1' 'h3 workers=1' > hosts
  partition_run async
  partition_run ssp:2
  no_pskv_in_hosts h1 h2 h3
}

# A host cut for 3 s (netns harness, root only): the cut server's connections do not
# close (no FIN, no RST: half-open), so the connection detector stays quiet and the
# lease declares it dead; R = 2 keeps the job exact, and the server, healed, learns
# it was replaced and exits 3.
tags detect_host_cut root
t_detect_host_cut() {
  netns_up 3; local rc=$?
  [ $rc -eq 77 ] && return 77
  [ $rc -eq 0 ] || fail "cannot create the namespaced hosts"
  trap '"$NETNS" down > /dev/null 2>&1' EXIT
  printf '%s\n' 'h1 scheduler servers=1 workers=2' 'h2 servers=1 workers=1' 'h3 servers=1' > hosts
  local log=$TDIR/logs i
  "$HOSTS_LAUNCH" --hostfile hosts "${NETNS_SSH[@]}" --bin-dir "$BIN" --timeout 150 --insecure \
    --scheduler-opt=--replicas=2 --log-dir "$log" -- --app check --rounds 1200 --slowdown 3 \
    > launch.out 2>&1 &
  local lpid=$!
  for i in $(seq 300); do [ "$(cat "$log"/worker-*.log 2>/dev/null | grep -c 'joined job')" -ge 3 ] && break; sleep 0.1; done
  sleep 1
  "$NETNS" cut h3 || fail "cut failed"
  sleep 3
  wait_line "$log/scheduler.log" 'is dead (silent' 1 5
  "$NETNS" heal h3 || fail "heal failed"
  grep -q 'server rank [0-9]* at 10.213.0.13:[0-9]*) is dead (silent [0-9]* ms, phi [0-9.]*): marked dead' "$log/scheduler.log" ||
    fail "the cut server was not declared dead by its lease: $(grep -h 'marked dead' "$log/scheduler.log")"
  grep -q 'connection closed' "$log/scheduler.log" && fail "a connection-closed death while the host was cut: $(grep 'connection closed' "$log/scheduler.log")"
  wait $lpid || fail "launch-hosts exited $?: $(tail -n 5 launch.out)"
  for i in 0 1 2; do
    grep -q '^check ok:' "$log/worker-$i.log" || fail "worker $i: $(tail -n 2 "$log/worker-$i.log")"
  done
  grep -q 'declared this server dead' "$log/server-2.log" || fail "the cut server did not learn it was replaced"
  no_pskv_in_hosts h1 h2 h3
}
