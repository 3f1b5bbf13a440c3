#!/usr/bin/env bash
# launch-local.sh - run a whole pskv cluster (scheduler, servers, workers) on this machine.
#
# Usage:
#   scripts/launch-local.sh --servers S --workers W [--port P] [--timeout SEC]
#       [--log-dir DIR] [--bin-dir DIR] [--scheduler-opt ARG]... [--server-opt ARG]...
#       [--worker-opt RANK:ARG]... [-- WORKER_ARGS...]
#
# Starts, as direct children of this script:
#   pskv-scheduler --port P --servers S --workers W [scheduler-opts...]
#   S x pskv-server --scheduler 127.0.0.1:P [server-opts...]
#   W x pskv-worker --scheduler 127.0.0.1:P --rank R WORKER_ARGS... [rank R's worker-opts...]
#   (a rank's own options come last, so they override the shared ones)
#
# Options (each also accepted as --flag=value):
#   --servers S          number of servers (>= 1, required)
#   --workers W          number of workers (>= 1, required)
#   --port P             scheduler port (default: a free random port in 20000-60000)
#   --timeout SEC        stop everything after SEC seconds, exit 124 (default 3600)
#   --log-dir DIR        where logs and pid files go (default: new mktemp -d /tmp/pskv-XXXXXX)
#   --bin-dir DIR        where the binaries are (default: $PSKV_BIN_DIR, else
#                        <script dir>/../build/bin)
#   --scheduler-opt ARG  append ARG to the scheduler's command line (repeatable)
#   --server-opt ARG     append ARG to every server's command line (repeatable)
#   --worker-opt R:ARG   append ARG to worker R's command line only (repeatable),
#                        e.g. --worker-opt 1:--slowdown --worker-opt 1:3
#   --help               print this help and exit 0
#
# Log dir contents: scheduler.log/.pid, server-I.log/.pid, worker-R.log/.pid (stdout+stderr
# of each daemon, and the pid of the daemon process itself). Worker 0's output is also
# streamed to this script's stdout.
#
# Runs until every worker has exited (a daemon that dies does not stop the others), then
# gives the scheduler and servers up to 10 s to shut down by themselves, then stops whatever
# is left (SIGTERM, up to 5 s, then SIGKILL). Ctrl-C / SIGTERM / the time-out stop
# everything the same way.
#
# Exit status: 0 when every worker exited 0; else the status of the lowest-rank failing
# worker (128+N when killed by signal N); 124 on time-out; 130 on SIGINT (143 on SIGTERM,
# 129 on SIGHUP); 2 on bad usage or a missing binary.
#
# Example: scripts/launch-local.sh --servers 2 --workers 3 -- --app check

set -u
set -o pipefail

PROG=launch-local

# A script started in the background by a non-interactive shell inherits SIGINT ignored,
# and bash cannot trap a signal that was ignored on entry. Start afresh (same pid) with
# SIGINT at its default so that kill -INT / Ctrl-C still stop the cluster.
if [[ -z ${PSKV_LAUNCH_REEXEC:-} && $(trap -p INT) == *"''"* ]] &&
  env --default-signal=INT true 2>/dev/null; then
  PSKV_LAUNCH_REEXEC=1 exec env --default-signal=INT "$BASH" "${BASH_SOURCE[0]}" "$@"
fi
unset PSKV_LAUNCH_REEXEC

usage() {
  cat <<'EOF'
Usage: launch-local.sh --servers S --workers W [--port P] [--timeout SEC]
         [--log-dir DIR] [--bin-dir DIR] [--scheduler-opt ARG]... [--server-opt ARG]...
         [--worker-opt RANK:ARG]... [-- WORKER_ARGS...]

Runs one pskv-scheduler, S pskv-server and W pskv-worker processes on this machine,
waits for the workers, then stops everything.

  --servers S          number of servers (>= 1, required)
  --workers W          number of workers (>= 1, required)
  --port P             scheduler port (default: a free random port)
  --timeout SEC        stop everything after SEC seconds and exit 124 (default 3600)
  --log-dir DIR        directory for <daemon>.log / <daemon>.pid (default: mktemp -d)
  --bin-dir DIR        directory holding the binaries (default: $PSKV_BIN_DIR,
                       else <script dir>/../build/bin)
  --scheduler-opt ARG  append ARG to the scheduler's arguments (repeatable)
  --server-opt ARG     append ARG to every server's arguments (repeatable)
  --worker-opt R:ARG   append ARG to worker R's arguments only (repeatable)
  --help               show this help
Every option also accepts the --flag=value form. Arguments after -- go to every worker.

Exit status: 0 if all workers exited 0, else the lowest-rank failing worker's status;
124 on time-out; 130 on Ctrl-C; 2 on usage errors or missing binaries.
EOF
}

# Messages go to msg_fd: 2 at first, 3 (a copy of the real stderr) once daemons run.
msg_fd=2
msg() { echo "$PROG: $*" >&"$msg_fd"; }

die_usage() {
  msg "$*"
  usage >&2
  exit 2
}

die() {
  msg "$*"
  exit 2
}

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }
is_pos_int() { [[ $1 =~ ^[0-9]{1,9}$ ]] && ((10#$1 >= 1)); }

# ---------------------------------------------------------------- argument parsing
servers=
workers=
port=
timeout_s=3600
log_dir=
bin_dir=
scheduler_opts=()
server_opts=()
wopt_ranks=()
wopt_args=()
worker_args=()

while (($# > 0)); do
  arg=$1
  case $arg in
    --)
      shift
      worker_args=("$@")
      break
      ;;
    --help | -h)
      usage
      exit 0
      ;;
    --servers | --workers | --port | --timeout | --log-dir | --bin-dir | \
      --scheduler-opt | --server-opt | --worker-opt)
      (($# >= 2)) || die_usage "option $arg needs a value"
      name=$arg
      val=$2
      shift 2
      ;;
    --servers=* | --workers=* | --port=* | --timeout=* | --log-dir=* | --bin-dir=* | \
      --scheduler-opt=* | --server-opt=* | --worker-opt=*)
      name=${arg%%=*}
      val=${arg#*=}
      shift
      ;;
    *)
      die_usage "unknown option or argument: '$arg' (worker arguments go after --)"
      ;;
  esac
  case $name in
    --servers) servers=$val ;;
    --workers) workers=$val ;;
    --port) port=$val ;;
    --timeout) timeout_s=$val ;;
    --log-dir)
      [[ -n $val ]] || die_usage "--log-dir needs a non-empty value"
      log_dir=$val
      ;;
    --bin-dir)
      [[ -n $val ]] || die_usage "--bin-dir needs a non-empty value"
      bin_dir=$val
      ;;
    --scheduler-opt) scheduler_opts+=("$val") ;;
    --server-opt) server_opts+=("$val") ;;
    --worker-opt)
      [[ $val == *:* ]] || die_usage "--worker-opt needs RANK:ARG, got '$val'"
      r=${val%%:*}
      is_uint "$r" || die_usage "--worker-opt: bad rank '$r' in '$val'"
      wopt_ranks+=("$((10#$r))")
      wopt_args+=("${val#*:}")
      ;;
  esac
done

[[ -n $servers ]] || die_usage "--servers is required"
[[ -n $workers ]] || die_usage "--workers is required"
is_pos_int "$servers" || die_usage "--servers must be an integer >= 1, got '$servers'"
is_pos_int "$workers" || die_usage "--workers must be an integer >= 1, got '$workers'"
is_pos_int "$timeout_s" || die_usage "--timeout must be a positive integer, got '$timeout_s'"
servers=$((10#$servers))
workers=$((10#$workers))
timeout_s=$((10#$timeout_s))
if [[ -n $port ]]; then
  if ! is_pos_int "$port" || ((10#$port > 65535)); then
    die_usage "--port must be an integer in 1..65535, got '$port'"
  fi
  port=$((10#$port))
fi
for r in "${wopt_ranks[@]}"; do
  ((r < workers)) || die_usage "--worker-opt: rank $r out of range (workers: $workers)"
done

# ---------------------------------------------------------------- binaries
if [[ -z $bin_dir ]]; then
  if [[ -n ${PSKV_BIN_DIR:-} ]]; then
    bin_dir=$PSKV_BIN_DIR
  else
    script_dir=$(cd "$(dirname "$0")" && pwd) || die "cannot resolve the script's directory"
    bin_dir="$(dirname "$script_dir")/build/bin"
  fi
fi
[[ $bin_dir == /* ]] || bin_dir="$PWD/$bin_dir"
for b in pskv-scheduler pskv-server pskv-worker; do
  if [[ ! -f $bin_dir/$b || ! -x $bin_dir/$b ]]; then
    die "binary $bin_dir/$b is missing or not executable (build pskv first, or use --bin-dir DIR / PSKV_BIN_DIR)"
  fi
done

# ---------------------------------------------------------------- port
have_ss=0
if command -v ss >/dev/null 2>&1 && ss -Htln >/dev/null 2>&1; then
  have_ss=1
fi

# Prints the TCP ports something listens on, space separated with spaces around.
listening_ports() {
  local _s _r _q local_addr _rest out=" "
  while read -r _s _r _q local_addr _rest; do
    out+="${local_addr##*:} "
  done < <(ss -Htln 2>/dev/null)
  printf '%s' "$out"
}

port_is_free() {
  local p=$1
  if ((have_ss)); then
    [[ $(listening_ports) != *" $p "* ]]
  else
    # Nothing answers a connect -> nothing listens there.
    ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null
  fi
}

if [[ -z $port ]]; then
  for _ in {1..200}; do
    p=$((20000 + (RANDOM * 32768 + RANDOM) % 40001))
    if port_is_free "$p"; then
      port=$p
      break
    fi
  done
  [[ -n $port ]] || die "could not find a free TCP port"
fi

# ---------------------------------------------------------------- log dir
if [[ -n $log_dir ]]; then
  mkdir -p -- "$log_dir" || die "cannot create log dir '$log_dir'"
else
  log_dir=$(mktemp -d /tmp/pskv-XXXXXX) || die "mktemp -d failed"
fi
msg "logs in $log_dir"

# From here on this shell's own stderr goes to /dev/null: bash would otherwise print
# "line N: PID Killed ..." job notices at odd moments for daemons that die of a signal
# (the script reports those itself, through msg on fd 3, the real stderr).
exec 3>&2 2>/dev/null
msg_fd=3

# ---------------------------------------------------------------- process bookkeeping
# Index 0: scheduler, 1..S: servers, S+1..S+W: workers.
names=()
pids=()
alive=()
status=()
tail_pid=
got_signal=
signal_count=0

# shellcheck disable=SC2317  # invoked from traps
on_signal() {
  signal_count=$((signal_count + 1))
  [[ -n $got_signal ]] || got_signal=$1
}
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM
trap 'on_signal HUP' HUP

# Safety net: whatever happens, leave no process behind.
# shellcheck disable=SC2317  # invoked from the EXIT trap
emergency_cleanup() {
  local i
  for i in "${!pids[@]}"; do
    if ((alive[i])); then
      kill -KILL "${pids[i]}" 2>/dev/null
    fi
  done
  [[ -n $tail_pid ]] && kill -TERM "$tail_pid" 2>/dev/null
  return 0
}
trap emergency_cleanup EXIT

# start_daemon NAME CMD... : starts CMD in the background, logs to NAME.log, pid to NAME.pid
start_daemon() {
  local name=$1 pid
  shift
  local log="$log_dir/$name.log"
  : >"$log" || die "cannot write $log"
  "$@" </dev/null >>"$log" 2>&1 3>&- &
  pid=$!
  echo "$pid" >"$log_dir/$name.pid" || die "cannot write $log_dir/$name.pid"
  names+=("$name")
  pids+=("$pid")
  alive+=(1)
  status+=("")
}

# nap SECONDS: sleep (keeping bash's job notices away from the real stderr, see above).
nap() { { sleep "$1"; } 2>/dev/null; }

# reap [quiet]: notices exited processes and collects their exit status. Workers are
# looked at first, so that a scheduler or server that shuts down right after the last
# worker is not reported as having died under running workers.
reap() {
  local quiet=${1:-} i st n=${#pids[@]}
  local order=()
  for ((i = servers + 1; i < n; i++)); do order+=("$i"); done
  for ((i = 0; i <= servers && i < n; i++)); do order+=("$i"); done
  for i in "${order[@]}"; do
    ((alive[i])) || continue
    if ! kill -0 "${pids[i]}" 2>/dev/null; then
      wait "${pids[i]}" 2>/dev/null
      st=$?
      alive[i]=0
      status[i]=$st
      [[ -z $quiet ]] || continue
      if ((i > servers)); then
        ((st == 0)) || msg "${names[i]} (pid ${pids[i]}) exited with status $st"
      elif ((n > servers + 1)) && any_alive $((servers + 1)) $((n - 1)); then
        msg "${names[i]} (pid ${pids[i]}) exited with status $st while workers were running"
      fi
    fi
  done
}

# any_alive FROM TO: is any process with index in FROM..TO still running?
any_alive() {
  local i
  for ((i = $1; i <= $2; i++)); do
    ((alive[i])) && return 0
  done
  return 1
}

# stop_all: SIGTERM everything still running, wait up to 5 s, then SIGKILL.
stop_all() {
  local i n
  for i in "${!pids[@]}"; do
    if ((alive[i])); then
      kill -TERM "${pids[i]}" 2>/dev/null
      kill -CONT "${pids[i]}" 2>/dev/null # a stopped process would not see SIGTERM
    fi
  done
  local start_count=$signal_count
  for ((n = 0; n < 50; n++)); do
    reap quiet
    any_alive 0 $((${#pids[@]} - 1)) || break
    ((signal_count > start_count)) && break # impatient user: kill right away
    nap 0.1
  done
  if any_alive 0 $((${#pids[@]} - 1)); then
    for i in "${!pids[@]}"; do
      if ((alive[i])); then
        msg "${names[i]} (pid ${pids[i]}) did not stop on SIGTERM, sending SIGKILL"
        kill -KILL "${pids[i]}" 2>/dev/null
      fi
    done
    for ((n = 0; n < 50; n++)); do
      reap quiet
      any_alive 0 $((${#pids[@]} - 1)) || break
      nap 0.1
    done
  fi
  for i in "${!pids[@]}"; do
    if ((alive[i])); then
      msg "warning: ${names[i]} (pid ${pids[i]}) is still there after SIGKILL"
    fi
  done
}

# stop_tail WAIT_TENTHS: let the tail of worker 0's log finish by itself, then stop it.
stop_tail() {
  local n
  [[ -n $tail_pid ]] || return 0
  for ((n = 0; n < $1; n++)); do
    kill -0 "$tail_pid" 2>/dev/null || break
    nap 0.1
  done
  if kill -0 "$tail_pid" 2>/dev/null; then
    kill -TERM "$tail_pid" 2>/dev/null
    for ((n = 0; n < 20; n++)); do
      kill -0 "$tail_pid" 2>/dev/null || break
      nap 0.1
    done
    kill -KILL "$tail_pid" 2>/dev/null
  fi
  wait "$tail_pid" 2>/dev/null
  tail_pid=
}

# Waits (up to ~5 s) until the scheduler listens on its port, so servers and workers
# do not race it. Starts the others anyway after that.
wait_scheduler_listening() {
  local n
  if ((!have_ss)); then
    nap 0.3
    return 0
  fi
  for ((n = 0; n < 100; n++)); do
    [[ -n $got_signal ]] && return 0
    kill -0 "${pids[0]}" 2>/dev/null || return 0
    [[ $(listening_ports) == *" $port "* ]] && return 0
    nap 0.05
  done
  msg "warning: scheduler is not listening on port $port after 5 s; starting the others anyway"
}

# ---------------------------------------------------------------- launch
SECONDS=0
sched="127.0.0.1:$port"
start_daemon scheduler "$bin_dir/pskv-scheduler" --port "$port" --servers "$servers" \
  --workers "$workers" "${scheduler_opts[@]}"
wait_scheduler_listening

for ((i = 0; i < servers; i++)); do
  [[ -n $got_signal ]] && break
  start_daemon "server-$i" "$bin_dir/pskv-server" --scheduler "$sched" "${server_opts[@]}"
done

for ((r = 0; r < workers; r++)); do
  [[ -n $got_signal ]] && break
  # a rank's own options come last, so they override the shared WORKER_ARGS
  cmd=("$bin_dir/pskv-worker" --scheduler "$sched" --rank "$r" "${worker_args[@]}")
  for j in "${!wopt_ranks[@]}"; do
    ((wopt_ranks[j] == r)) && cmd+=("${wopt_args[j]}")
  done
  start_daemon "worker-$r" "${cmd[@]}"
  if ((r == 0)); then
    tail -n +1 -s 0.2 -f --pid="${pids[servers + 1]}" "$log_dir/worker-0.log" </dev/null 2>&3 3>&- &
    tail_pid=$!
  fi
done

# ---------------------------------------------------------------- wait for workers
timed_out=0
first_worker=$((servers + 1))
last_worker=$((servers + workers))
if [[ -z $got_signal ]]; then
  while :; do
    reap
    [[ -n $got_signal ]] && break
    any_alive "$first_worker" "$last_worker" || break
    if ((SECONDS >= timeout_s)); then
      timed_out=1
      break
    fi
    nap 0.2
  done
fi

if [[ -z $got_signal ]] && ((!timed_out)); then
  # All workers are done: let worker 0's output drain, then give the scheduler and the
  # servers up to 10 s for their orderly shutdown.
  stop_tail 30
  for ((n = 0; n < 100; n++)); do
    reap quiet
    any_alive 0 "$servers" || break
    [[ -n $got_signal ]] && break
    nap 0.1
  done
fi

if ((timed_out)); then
  msg "timed out after $timeout_s s"
fi
stop_all
stop_tail 10

# ---------------------------------------------------------------- exit status
rc=0
summary=
for ((r = 0; r < workers; r++)); do
  i=$((first_worker + r))
  st=${status[i]:-}
  [[ -n $st ]] || st="-" # never started (interrupted while launching)
  summary+=" $st"
  if ((rc == 0)) && [[ $st != - ]] && ((st != 0)); then
    rc=$st
  fi
done
msg "workers exit statuses:$summary"

if ((timed_out)); then
  rc=124
fi
case $got_signal in
  INT) rc=130 ;;
  TERM) rc=143 ;;
  HUP) rc=129 ;;
esac
trap - EXIT
exit "$rc"
