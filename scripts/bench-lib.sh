# shellcheck shell=bash
# bench-lib.sh - what the benchmark scripts share. Sourced, never run:
#   . "$here/bench-lib.sh"      (sources free-port.sh; data_job needs $bin and $out)

. "$(dirname "${BASH_SOURCE[0]}")/free-port.sh"

# median: the median of the numbers on stdin (the mean of the middle two for an even
# count, to one decimal), "-" for none.
median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "-"; else if (NR%2) print a[(NR+1)/2]; else printf "%.1f\n", (a[NR/2]+a[NR/2+1])/2}'; }

# data_job DIR NAME [SCHEDULER FLAGS...] -- WORKER ARGS...: a scheduler and 2 servers
# with data dirs under DIR (logs DIR/sched-NAME.log, DIR/sN-NAME.log), 1 worker
# (DIR/w-NAME.log) given at most 600 s; the daemons are stopped after it (TERM, then
# KILL after 10 s). Returns the worker's status. Their pids are in $out/pids.
data_job() {
  local d=$1 name=$2 port i t sopts=(); shift 2
  while [ "$1" != -- ]; do sopts+=("$1"); shift; done; shift
  port=$(free_port)
  mkdir -p "$d/sched" "$d/s0" "$d/s1"
  "$bin/pskv-scheduler" --port "$port" --servers 2 --workers 1 --data-dir "$d/sched" "${sopts[@]}" \
    > "$d/sched-$name.log" 2>&1 & echo $! > "$out/pids"
  for i in 0 1; do
    "$bin/pskv-server" --scheduler "127.0.0.1:$port" --data-dir "$d/s$i" > "$d/s$i-$name.log" 2>&1 &
    echo $! >> "$out/pids"
  done
  timeout 600 "$bin/pskv-worker" --scheduler "127.0.0.1:$port" "$@" > "$d/w-$name.log" 2>&1
  local rc=$?
  sleep 0.5
  kill $(cat "$out/pids") 2>/dev/null
  for t in $(seq 100); do kill -0 $(cat "$out/pids") 2>/dev/null || break; sleep 0.1; done
  kill -KILL $(cat "$out/pids") 2>/dev/null
  wait 2>/dev/null
  return $rc
}
