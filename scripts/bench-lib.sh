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

# cpu_sampler DIR: while the job whose launch-local log dir is DIR runs, the CPU
# seconds (every thread) of its scheduler, servers and evaluator, read from /proc
# every 0.1 s into DIR/cpu-NAME (the last reading before each exits); start it in
# the background before launch-local and wait for it after. The train app's workers
# report their own ("rank R cpu: ..."). Bash builtins only, no process a reading:
# with cat, awk and sleep each time it took 15 % of a core, taken from the job it
# measures (and not from the peers the benches compare it with).
cpu_sampler() {
  local d=$1 f p n=0 tck line name t tick alive
  local -a st
  tck=$(getconf CLK_TCK)
  exec {tick}<> <(:) # a pipe nobody writes: read -t on it is a sleep without a process
  until compgen -G "$d/worker-*.pid" > /dev/null; do
    read -rt 0.1 -u "$tick"; n=$((n + 1)); [ $n -lt 600 ] || { exec {tick}<&-; return 0; }
  done
  while :; do
    alive=0
    for f in "$d"/scheduler.pid "$d"/server-*.pid "$d"/evaluator*.pid; do
      [ -f "$f" ] && read -r p < "$f" && [ -n "$p" ] || continue
      { read -r line < "/proc/$p/stat"; } 2>/dev/null || continue
      read -r -a st <<< "${line##*) }" # from field 3 (state): utime is [11], stime [12]
      t=$((st[11] + st[12]))
      alive=1
      name=${f##*/}
      printf '%d.%02d\n' $((t / tck)) $((t % tck * 100 / tck)) > "$d/cpu-${name%.pid}"
    done
    [ $alive -eq 1 ] || break
    read -rt 0.1 -u "$tick"
  done
  exec {tick}<&-
  return 0
}

# floor_of DIR: the waiting fraction the workers of that job cannot go below on a
# machine their job fills: every CPU second it spends outside the workers' compute
# (the library, ZeroMQ's threads, the servers' updates and copies, the scheduler, an
# evaluator) is a second no worker computes, so floor = 1 - (the workers' compute
# CPU) / (the job's CPU) (docs/benchmarks.md, "The waiting floor"). "-" without the
# workers' "cpu:" lines.
floor_of() {
  cat "$1"/cpu-* 2>/dev/null | awk -v d="$1" '{o += $1}
    END {cmd = "cat " d "/worker-*.log"
         while ((cmd | getline l) > 0)
           if (l ~ /^rank [0-9]+ cpu: /) {split(l, a, " "); c += a[5]; p += a[11]}
         if (o > 0 && p > 0 && c > 0) printf "%.3f", 1 - c / (p + o); else print "-"}'
}
