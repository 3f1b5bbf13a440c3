#!/usr/bin/env bash
# Chaos soak: a job of 3 servers (R = 2) and 4 workers running `--app check
# --count-acked` on namespaced hosts (scripts/netns-cluster.sh), with keys, under
# each model of --models in turn. Every 20-40 s one random fault:
#   kill-server  kill -9 of a server; started again 2-5 s later (joins as a new node)
#   kill-worker  kill -9 of a worker; started again 2-5 s later with its --rank and
#                its --acked-log, from which it goes on counting
#   stop-server  SIGSTOP of a server for 2 s (declared dead and replaced, it exits 3
#                when resumed; started again 2-5 s later)
#   cut-host     a host cut off for 3 s (netns-cluster.sh cut/heal): its server is
#                replaced and started again, its worker comes back by itself
# Hosts: h1 scheduler (never faulted), h2..h4 a server and a worker each, h5 a worker.
# At the end the workers stop on a stop file and check that every key equals the
# pushes acknowledged to any incarnation of any rank (each exactly once), plus at
# most the pushes of unknown fate (sent by a killed incarnation before it learned
# their outcome). Pass: every worker's check passes, no daemon exits unexpectedly,
# nothing left waiting for replicas, no partition lost, and no daemon alive from
# minute --rss-from to the end grows its RSS (VmRSS) by more than 5%.
#
# Usage: scripts/chaos.sh [--minutes N] [--models LIST] [--seed S] [--rss-from MIN]
#          [--interval LO:HI] [--slowdown F] [--push MODE] [--log-dir DIR] [--keep-logs]
#          [--sequence LIST]
#   --minutes N      soak time per model (default 5)
#   --models LIST    comma-separated consistency models (default async,ssp:4)
#   --seed S         seed of the fault choices (default: random; printed)
#   --rss-from MIN   minute of the RSS baseline (default 5, or half the soak when
#                    shorter than 10 minutes)
#   --interval LO:HI seconds between faults (default 20:40)
#   --slowdown F     the workers' --slowdown (default 1.4: 2 ms per clock, which keeps
#                    a 30-minute run's sums below 2^24, where float32 stays exact)
#   --push MODE      how the workers push each clock (one push per partition):
#                    push (default: pskv_push, then pskv_clock), pushpull (pskv_pushpull,
#                    the clock riding on the last one: check --pull pushpull), buffer
#                    (pskv_push_buffer_send, then pskv_clock) or buffer-clock (the
#                    clock riding on the last: pskv_push_buffer_send_clock)
#   --log-dir DIR    logs there (default mktemp -d /tmp/pskv-chaos-XXXXXX)
#   --keep-logs      keep the logs after a pass (a failure always keeps them)
#   --sequence LIST  these faults in this order (cycling) instead of random ones:
#                    KIND:TARGET,... with KIND kill-server, kill-worker, stop-server
#                    (TARGET server-I or worker-R) or cut-host (TARGET h2..h5), to
#                    replay a failure, e.g. cut-host:h4,cut-host:h4
# Needs root (network namespaces) and the cluster to itself: run it under
#   flock /tmp/pskv-netns-user.lock scripts/chaos.sh ...
# Exit status: 0 PASS, 1 FAIL, 2 usage, 77 skipped (not root).
set -u
here=$(cd "$(dirname "$0")" && pwd)
BIN=${PSKV_BIN_DIR:-$here/../build/bin}
NETNS=$here/netns-cluster.sh
minutes=5 models=async,ssp:4 seed=$((RANDOM * 32768 + RANDOM)) rss_from="" ilo=20 ihi=40
slowdown=1.4 work="" keep=0 sequence=() push=push
usage() { sed -n '20,43p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --minutes) minutes=${2:-}; shift 2 ;;
    --models) models=${2:-}; shift 2 ;;
    --seed) seed=${2:-}; shift 2 ;;
    --rss-from) rss_from=${2:-}; shift 2 ;;
    --interval) ilo=${2%%:*}; ihi=${2##*:}; shift 2 ;;
    --slowdown) slowdown=${2:-}; shift 2 ;;
    --push) push=${2:-}; shift 2 ;;
    --log-dir) work=${2:-}; shift 2 ;;
    --keep-logs) keep=1; shift ;;
    --sequence) read -r -a sequence <<< "${2//,/ }"; shift 2 ;;
    -h|--help) usage ;;
    *) echo "chaos: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ $minutes =~ ^[0-9]+(\.[0-9]+)?$ && $seed =~ ^[0-9]+$ && $ilo =~ ^[0-9]+$ && $ihi =~ ^[0-9]+$ &&
   $ilo -le $ihi && $ilo -ge 5 ]] || usage
case $push in
  push) push_args=() ;;
  pushpull) push_args=(--pull pushpull) ;;
  buffer|buffer-clock) push_args=(--push "$push") ;;
  *) usage ;;
esac
soak_s=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')
[ -n "$rss_from" ] || rss_from=$(awk -v m="$minutes" 'BEGIN { print (m >= 10 ? 5 : m / 2) }')
base_s=$(awk -v m="$rss_from" 'BEGIN { printf "%d", m * 60 }')
[ "$soak_s" -ge 60 ] && [ "$base_s" -lt "$soak_s" ] || { echo "chaos: --minutes must be >= 1 and --rss-from below it" >&2; exit 2; }
if [ "$(id -u)" -ne 0 ]; then echo "chaos: needs root (network namespaces); skipped"; exit 77; fi
for b in pskv-scheduler pskv-server pskv-worker pskvctl; do
  [ -x "$BIN/$b" ] || { echo "chaos: $BIN/$b missing (make all)" >&2; exit 2; }
done
BIN=$(cd "$BIN" && pwd)
[ -n "$work" ] || work=$(mktemp -d /tmp/pskv-chaos-XXXXXX)
mkdir -p "$work" || exit 2
RANDOM=$seed
SCHED=10.213.0.11:7700
ip_of() { echo "10.213.0.$((10 + ${1#h}))"; }
# shellcheck source=../test/lib.sh
. "$here/../test/lib.sh" # now_ms, stamp_ms (its start is chaos's own below: one slot's next incarnation)
say() { echo "chaos: $*"; }

# ---- the daemons: one slot each (name, host, pid, incarnation) --------------------
names=(scheduler server-0 server-1 server-2 worker-0 worker-1 worker-2 worker-3)
hosts=(h1 h2 h3 h4 h2 h3 h4 h5)
declare -A pid=() sub=() inc=() restart_at=() expect=() retries=()
cut_now="" fail_reasons=()
t0_ms=0 dir="" model="" bridge=""

failed() { fail_reasons+=("$*"); say "FAIL: $*"; }

# start I: incarnation inc[I] of daemon I in its host's namespace, under a subshell
# that writes the daemon's pid (ip execs it) to NAME.INC.pid and its exit status to
# NAME.INC.rc (bash's notice of a job killed by a signal goes to the daemon's log).
start() {
  local n=${names[$1]} h=${hosts[$1]} args f
  inc[$n]=$(( ${inc[$n]:-0} + 1 ))
  f=$dir/$n.${inc[$n]}
  case $n in
    scheduler) args=("$BIN/pskv-scheduler" --port 7700 --servers 3 --workers 4 --replicas 2) ;;
    server-*) args=("$BIN/pskv-server" --scheduler "$SCHED") ;;
    worker-*) args=("$BIN/pskv-worker" --scheduler "$SCHED" --rank "${n#worker-}" --app check
                    --consistency "$model" --count-acked --rounds 1000000 --slowdown "$slowdown"
                    --acked-log "$dir/acked-${n#worker-}" --stop-file "$dir/stop" "${push_args[@]}") ;;
  esac
  (
    ip netns exec "pskv-$h" "${args[@]}" --advertise "$(ip_of "$h")" --keys "$dir/keys/$n" &
    echo $! > "$f.pid"
    wait $!
    echo $? > "$f.rc"
  ) > "$f.log" 2>&1 &
  sub[$n]=$!
  wait_for 5 test -s "$f.pid"
  pid[$n]=$(cat "$f.pid")
  restart_at[$n]=0 expect[$n]=""
}

# reap NAME: the exit status of NAME's last incarnation (its subshell ends with it).
reap() {
  local f=$dir/$1.${inc[$1]}
  wait "${sub[$1]}" 2>/dev/null
  REPLY=$(cat "$f.rc" 2>/dev/null)
  REPLY=${REPLY:-255}
}

# alive PID: running and not a zombie.
alive() { [ -r "/proc/$1/stat" ] && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat"; }

# supervise: notes daemons that exited (expected after a fault, or not) and starts
# again the ones due. With `final` set nothing is started again.
supervise() {
  local i n p rc now
  now=$(now_ms)
  if ! alive "${pid[scheduler]}"; then
    [ -n "${sched_dead:-}" ] || failed "the scheduler exited: $(grep -h 'ERROR\|every worker is done' "$dir/scheduler.1.log" | tail -n 1)$(outside)"
    sched_dead=1
    return
  fi
  for i in 1 2 3 4 5 6 7; do
    n=${names[$i]} p=${pid[$n]:-}
    if [ -n "$p" ] && ! alive "$p"; then
      reap "$n"; rc=$REPLY
      pid[$n]=""
      if [ -n "${expect[$n]}" ] && [[ " ${expect[$n]} " == *" $rc "* ]]; then
        say "t=$(( (now - t0_ms) / 1000 ))s $n exited with status $rc after the fault"
      elif [[ $n == worker-* ]] && grep -q 'cannot join the job' "$dir/$n.${inc[$n]}.log" &&
           [ "${retries[$n]:-0}" -lt 20 ]; then
        retries[$n]=$(( ${retries[$n]:-0} + 1 )) # its rank not free yet: again in 1 s
        restart_at[$n]=$((now + 1000))
        continue
      else
        failed "$n (incarnation ${inc[$n]}) exited with status $rc on its own: $(grep -h 'FAILED\|ERROR' "$dir/$n.${inc[$n]}.log" | tail -n 1)"
      fi
      [ -n "${final:-}" ] || restart_at[$n]=$((now + 2000 + RANDOM % 3001))
    fi
    if [ -z "${final:-}" ] && [ -z "${pid[$n]:-}" ] && [ "${restart_at[$n]:-0}" -gt 0 ] &&
       [ "$now" -ge "${restart_at[$n]}" ]; then
      start "$i"
      say "t=$(( (now - t0_ms) / 1000 ))s $n started again (incarnation ${inc[$n]})"
    fi
  done
}

# outside: a note when the hosts' bridge is not the one this soak made: someone else
# ran netns-cluster.sh down or up (which kills every process on the hosts) without
# taking /tmp/pskv-netns-user.lock.
bridge_id() { cat /sys/class/net/pskvbr0/ifindex 2>/dev/null; }
outside() {
  [ "$(bridge_id)" = "$bridge" ] ||
    echo " (the namespaced hosts were torn down from outside: another user of scripts/netns-cluster.sh without /tmp/pskv-netns-user.lock)"
}

all_up() {
  local n
  for n in "${names[@]}"; do [ -n "${pid[$n]:-}" ] && alive "${pid[$n]}" || return 1; done
}

# rss LABEL: one VmRSS sample of every daemon: "LABEL T_S NAME INC PID KB ANON FILE"
# lines (VmRSS, and its RssAnon and RssFile parts, in KiB).
rss() {
  local n kb t=$(( ($(now_ms) - t0_ms) / 1000 ))
  for n in "${names[@]}"; do
    [ -n "${pid[$n]:-}" ] || continue
    kb=$(awk '/^VmRSS:/ { r = $2 } /^RssAnon:/ { a = $2 } /^RssFile:/ { f = $2 }
              END { if (r != "") print r, a, f }' "/proc/${pid[$n]}/status" 2>/dev/null) || continue
    [ -n "$kb" ] && echo "$1 $t $n ${inc[$n]:-1} ${pid[$n]} $kb" >> "$dir/rss"
  done
}

# ---- faults ----------------------------------------------------------------------
declare -A nfault=()
faults=() # "T_MS KIND TARGET SERVER(0/1)"

fault() {
  local kind=$((RANDOM % 4)) i n h t i2
  case $kind in
    0) i=$((1 + RANDOM % 3)) n=${names[$i]} kind=kill-server ;;
    1) i=$((4 + RANDOM % 4)) n=${names[$i]} kind=kill-worker ;;
    2) i=$((1 + RANDOM % 3)) n=${names[$i]} kind=stop-server ;;
    3) h=h$((2 + RANDOM % 4)) n=$h kind=cut-host ;;
  esac
  if [ ${#sequence[@]} -gt 0 ]; then # --sequence: the next fault of the list, cycling
    kind=${sequence[$(( ${#faults[@]} % ${#sequence[@]} ))]}
    n=${kind#*:} kind=${kind%%:*} h=$n i=""
    for i2 in "${!names[@]}"; do [ "${names[$i2]}" = "$n" ] && i=$i2; done
  fi
  for i2 in "${names[@]}"; do expect[$i2]=""; done # an earlier fault's exits are over
  t=$(now_ms)
  say "t=$(( (t - t0_ms) / 1000 ))s fault $(( ${#faults[@]} + 1 )): $kind $n${i:+ (pid ${pid[$n]}, ${hosts[$i]})}"
  case $kind in
    kill-*) expect[$n]=137; kill -KILL "${pid[$n]}" ;;
    stop-server) expect[$n]=3; kill -STOP "${pid[$n]}"; sleep 2; kill -CONT "${pid[$n]}" ;;
    cut-host)
      for i in 1 2 3; do [ "${hosts[$i]}" = "$h" ] && expect[${names[$i]}]=3; done
      cut_now=$h; "$NETNS" cut "$h"; sleep 3; "$NETNS" heal "$h"; cut_now="" ;;
  esac
  nfault[$kind]=$(( ${nfault[$kind]:-0} + 1 ))
  local srv=1
  [ "$kind" = kill-worker ] || { [ "$kind" = cut-host ] && [ "$h" = h5 ]; } && srv=0
  faults+=("$t $kind $n $srv")
}

cleanup() {
  local n
  [ -n "$cut_now" ] && "$NETNS" heal "$cut_now" 2>/dev/null
  for n in "${names[@]}"; do
    [ -n "${pid[$n]:-}" ] && { kill -CONT "${pid[$n]}"; kill -KILL "${pid[$n]}"; } 2>/dev/null
  done
  "$NETNS" down > /dev/null 2>&1
}
trap 'cleanup; if [ $keep -eq 1 ] || [ "${verdict:-FAIL}" != PASS ]; then echo "chaos: logs kept in $work" >&2; else rm -rf "$work"; fi' EXIT
trap 'say "interrupted"; exit 1' INT TERM HUP

# ---- one model -------------------------------------------------------------------

# wait_for SECONDS CMD...: until CMD succeeds (every 0.2 s); 1 on time-out.
wait_for() {
  local end=$(( $(date +%s) + $1 )); shift
  until "$@"; do [ "$(date +%s)" -lt $end ] || return 1; sleep 0.2; done
}
joined() { [ "$(cat "$dir"/worker-*.1.log 2>/dev/null | grep -c 'joined job')" -ge 4 ]; }
status_json() { timeout 10 "$BIN/pskvctl" --scheduler "$SCHED" --keys "$dir/keys/control" status --json 2>/dev/null; }
# every daemon of a slot active and alive in the scheduler's view (workers have
# come back from a cut, restarted ones have joined)
settled() {
  local js n
  all_up || return 1
  js=$(status_json) || return 1
  for n in "${names[@]:1}"; do
    grep -q "\"pid\":${pid[$n]},\"state\":\"active\",\"alive\":true" <<< "$js" || return 1
  done
  echo "$js" > "$dir/status.json"
}

# end_phase: no more faults; every daemon back, the stop file, the workers' checks.
end_phase() {
  local n i rc deadline js
  deadline=$(( $(now_ms) + 90000 ))
  until settled; do
    supervise
    [ -z "${sched_dead:-}" ] || break
    if [ "$(now_ms)" -ge $deadline ]; then failed "the daemons did not all come back within 90 s"; break; fi
    sleep 0.5
  done
  js=$(cat "$dir/status.json" 2>/dev/null)
  grep -q '"lost":0' <<< "$js" || failed "partitions lost: $(grep -o '"lost":[0-9]*' <<< "$js")"
  rss end
  touch "$dir/stop"
  final=1
  deadline=$(( $(now_ms) + 180000 ))
  for i in 4 5 6 7 0 1 2 3; do # workers first: the job ends when they have
    n=${names[$i]}
    [ -n "${pid[$n]:-}" ] || continue
    while alive "${pid[$n]}" && [ "$(now_ms)" -lt $deadline ]; do sleep 0.2; done
    if alive "${pid[$n]}"; then
      failed "$n did not exit within 180 s of the stop file"
      kill -KILL "${pid[$n]}"
    fi
    reap "$n"; rc=$REPLY
    pid[$n]=""
    [ $rc -eq 0 ] || failed "$n exited with status $rc at the end: $(grep -h 'FAILED' "$dir/$n.${inc[$n]}.log" | tail -n 1)"
  done
  unset final
  for n in worker-0 worker-1 worker-2 worker-3; do
    grep -q 'final values equal the acknowledged pushes: yes' "$dir/$n.${inc[$n]}.log" ||
      failed "$n: $(grep -h '^check' "$dir/$n.${inc[$n]}.log" | tail -n 2 | tr '\n' ' ')"
  done
  for f in "$dir"/server-*.log; do
    grep -q 'left waiting: [1-9]' "$f" && failed "$(basename "$f" .log): $(grep -o 'left waiting: .*' "$f")"
  done
}

# ms_of: log lines on stdin -> their time stamps in ms since the epoch.
ms_of() { cut -c1-23 | tr T ' ' | date -u -f - +%s%3N 2>/dev/null; }

# failovers: per fault that took a server away, the time to the first push a new
# owner acknowledged (the earliest "failover:" line of any worker after the fault
# and before the next one), as test/faults.sh measures it.
failovers() {
  local k t kind target srv tn f stamps line worst=0 worst_at="" n=0
  stamps=$(grep -h 'failover: first push' "$dir"/worker-*.log | ms_of | sort -n)
  : > "$dir/failovers"
  for k in "${!faults[@]}"; do
    read -r t kind target srv <<< "${faults[$k]}"
    [ "$srv" = 1 ] || continue
    tn=$(awk '{ print $1 }' <<< "${faults[$((k + 1))]:-9999999999999 x}")
    f=$(awk -v a="$t" -v b="$tn" '$1 >= a && $1 < b { print $1 - a; exit }' <<< "$stamps")
    echo "$kind ${f:--} $target $(( (t - t0_ms) / 1000 ))" >> "$dir/failovers"
    [ -n "$f" ] || continue
    n=$((n + 1))
    [ "$f" -gt $worst ] && worst=$f worst_at="$kind $target at t=$(( (t - t0_ms) / 1000 ))s"
  done
  for kind in kill-server stop-server cut-host; do
    line=$(awk -v k="$kind" '$1 == k && $2 != "-" { print $2 }' "$dir/failovers" | sort -n | tr '\n' ' ' | sed 's/ $//')
    local none; none=$(awk -v k="$kind" '$1 == k && $2 == "-"' "$dir/failovers" | wc -l)
    [ "$none" -gt 0 ] && line+="${line:+ }(and $none with no failover line: no push was in flight to the server)"
    say "$model: failover ms after $kind: ${line:-none}"
  done
  say "$model: failovers $(grep -c 'replaced: view epoch' "$dir/scheduler.1.log") (servers replaced), view changes $(grep -o '"epoch":[0-9]*' "$dir/status.json" 2>/dev/null | cut -d: -f2 | sed 's/$/ (epoch at the end)/'), worst failover ${worst} ms${worst_at:+ ($worst_at)} over $n measured"
}

# rss_report: per daemon alive at the end, its RSS at the baseline and at the end.
rss_report() {
  awk -v from="$rss_from" -v model="$model" -v base_s="$base_s" '
    $1 == "base" { b[$3 " " $4 " " $5] = $6; ba[$3 " " $4 " " $5] = $7 }
    $1 == "sample" && !(($3 " " $4 " " $5) in first) { first[$3 " " $4 " " $5] = $2 }
    $1 == "end" { e[$3 " " $4 " " $5] = $6; ea[$3 " " $4 " " $5] = $7; order[++n] = $3 " " $4 " " $5 }
    END {
      bad = 0
      for (i = 1; i <= n; i++) {
        k = order[i]; split(k, p, " ")
        if (k in b) {
          g = (e[k] - b[k]) * 100 / b[k]
          printf "chaos: %s: rss %s#%s (pid %s): minute %s %.1f MiB, end %.1f MiB, %+.1f%% (anonymous %s -> %s KiB)%s\n",
            model, p[1], p[2], p[3], from, b[k] / 1024, e[k] / 1024, g, ba[k], ea[k], (g > 5 ? " GROWS" : "")
          if (g > 5) bad++
        } else {
          printf "chaos: %s: rss %s#%s (pid %s): started after minute %s (first sampled at t=%ss): not judged (end %.1f MiB)\n",
            model, p[1], p[2], p[3], from, first[k], e[k] / 1024
        }
      }
      exit (bad > 0)
    }' "$dir/rss" || failed "a daemon's RSS grew more than 5% from minute $rss_from to the end"
}

# counts: the pushes every rank reported (worker 0's summary line) and per rank.
counts() {
  local n line
  line=$(grep -ho '[0-9]* pushes acknowledged by all, [0-9]* of unknown fate' "$dir/worker-0.${inc[worker-0]}.log" | tail -n 1)
  [ -n "$line" ] && say "$model: $line"
  for n in worker-0 worker-1 worker-2 worker-3; do
    line=$(grep -ho 'rank [0-9]* over .* failed' "$dir/$n.${inc[$n]}.log" | tail -n 1)
    [ -n "$line" ] && say "$model: $line"
  done
  return 0
}

soak() {
  local i now end next next_rss based=0 nfail0=${#fail_reasons[@]}
  model=$1 dir=$work/${1//:/-}
  pid=() sub=() inc=() restart_at=() expect=() retries=() nfault=() faults=() sched_dead=""
  mkdir -p "$dir"
  say "$model: $minutes min, faults every $ilo-$ihi s, seed $seed, --push $push, logs in $dir"
  "$BIN/pskvctl" keys init "$dir/keys" --servers 3 --workers 4 > /dev/null || { failed "$model: no keyset"; return; }
  "$NETNS" up 5 > "$dir/netns.out" 2>&1 || { failed "$model: cannot make the hosts: $(tail -n 2 "$dir/netns.out")"; return; }
  bridge=$(bridge_id)
  start 0
  wait_for 10 grep -q 'listening on port' "$dir/scheduler.1.log" || { failed "$model: the scheduler did not start: $(tail -n 2 "$dir/scheduler.1.log")"; return; }
  for i in 1 2 3 4 5 6 7; do start $i; done
  wait_for 60 joined || { failed "$model: the workers did not join: $(tail -qn 1 "$dir"/worker-*.1.log)"; return; }
  t0_ms=$(now_ms)
  end=$((t0_ms + soak_s * 1000)) next=$((t0_ms + (ilo + RANDOM % (ihi - ilo + 1)) * 1000)) next_rss=$t0_ms
  while now=$(now_ms); [ "$now" -lt $end ] && [ ${#fail_reasons[@]} -eq "$nfail0" ]; do
    supervise
    [ "$now" -ge $next_rss ] && { rss sample; next_rss=$((next_rss + 10000)); }
    [ $based -eq 0 ] && [ "$now" -ge $((t0_ms + base_s * 1000)) ] && { rss base; based=1; }
    if [ "$now" -ge $next ] && [ "$now" -lt $((end - 10000)) ]; then
      if all_up; then fault; next=$(( $(now_ms) + (ilo + RANDOM % (ihi - ilo + 1)) * 1000 ))
      else next=$((now + 1000)); fi
    fi
    sleep 0.5
  done
  [ $based -eq 1 ] || rss base
  end_phase
  say "$model: faults ${#faults[@]}: kill-server ${nfault[kill-server]:-0}, kill-worker ${nfault[kill-worker]:-0}, stop-server ${nfault[stop-server]:-0}, cut-host ${nfault[cut-host]:-0}"
  failovers
  counts
  rss_report
  "$NETNS" down > /dev/null 2>&1
  if [ ${#fail_reasons[@]} -eq "$nfail0" ]; then say "$model: PASS"; else say "$model: FAIL"; fi
}

IFS=, read -r -a model_list <<< "$models"
for m in "${model_list[@]}"; do soak "$m"; done
if [ ${#fail_reasons[@]} -eq 0 ]; then
  verdict=PASS; say "PASS (${model_list[*]}; $minutes min each)"; exit 0
fi
verdict=FAIL
say "FAIL (${model_list[*]}; $minutes min each):"
printf '  %s\n' "${fail_reasons[@]}"
exit 1
