#!/usr/bin/env bash
# launch-local.sh - run a whole pskv cluster (scheduler, servers, workers) on this machine.
#
# Usage:
#   scripts/launch-local.sh --servers S --workers W [--port P] [--timeout SEC]
#       [--log-dir DIR] [--bin-dir DIR] [--keys DIR] [--scheduler-opt ARG]...
#       [--server-opt ARG]... [--worker-opt RANK:ARG]... [-- WORKER_ARGS...]
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
#   --port P             scheduler port (default: a free random port below the ephemeral range)
#   --timeout SEC        stop everything after SEC seconds, exit 124 (default 3600)
#   --log-dir DIR        where logs and pid files go (default: new mktemp -d /tmp/pskv-XXXXXX)
#   --bin-dir DIR        where the binaries are (default: $PSKV_BIN_DIR, else
#                        <script dir>/../build/bin)
#   --keys DIR           CURVE on every socket, with the keyset in DIR (`pskvctl keys init`
#                        layout: scheduler/, server-I/, worker-R/); made there first when
#                        DIR does not exist. Each daemon gets --keys DIR/<its name>.
#   --scheduler-opt ARG  append ARG to the scheduler's command line (repeatable)
#   --server-opt ARG     append ARG to every server's command line (repeatable)
#   --worker-opt R:ARG   append ARG to worker R's command line only (repeatable),
#                        e.g. --worker-opt 1:--slowdown --worker-opt 1:3
#   --evaluators N       0 (default) or 1: also start one pskv-evaluator with the
#                        workers' arguments (those after --) and give the scheduler
#                        --evaluators N; its log is evaluator.log. Its exit status does
#                        not count in this script's.
#   --evaluator-opt ARG  append ARG to the evaluator's command line only (repeatable),
#                        e.g. --evaluator-opt --save-best=/tmp/best.model
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

# shellcheck source=launch-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/launch-lib.sh" || {
  echo "$PROG: cannot read $(dirname "${BASH_SOURCE[0]}")/launch-lib.sh" >&2
  exit 2
}
reexec_with_default_int "${BASH_SOURCE[0]}" "$@"

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
  --keys DIR           CURVE with the keyset in DIR (pskvctl keys init layout;
                       made there when DIR does not exist)
  --scheduler-opt ARG  append ARG to the scheduler's arguments (repeatable)
  --server-opt ARG     append ARG to every server's arguments (repeatable)
  --worker-opt R:ARG   append ARG to worker R's arguments only (repeatable)
  --evaluators N       0 or 1: also run one pskv-evaluator with the workers' arguments
  --evaluator-opt ARG  append ARG to the evaluator's arguments only (repeatable)
  --help               show this help
Every option also accepts the --flag=value form. Arguments after -- go to every worker.

Exit status: 0 if all workers exited 0, else the lowest-rank failing worker's status;
124 on time-out; 130 on Ctrl-C; 2 on usage errors or missing binaries.
EOF
}

# ---------------------------------------------------------------- argument parsing
servers=
workers=
port=
keys=
evaluators=0
evaluator_opts=()

# set_opt NAME VAL: this script's own options (see parse_args in launch-lib.sh).
set_opt() {
  case $1 in
    --servers) servers=$2 ;;
    --workers) workers=$2 ;;
    --port) port=$2 ;;
    --evaluators)
      [[ $2 == 0 || $2 == 1 ]] || die_usage "--evaluators must be 0 or 1, got '$2'"
      evaluators=$2
      ;;
    --evaluator-opt) evaluator_opts+=("$2") ;;
    --keys)
      [[ -n $2 ]] || die_usage "--keys needs a directory"
      keys=$2
      ;;
  esac
}

parse_args "--servers --workers --port --keys --evaluators --evaluator-opt" "" "$@"

[[ -n $servers ]] || die_usage "--servers is required"
[[ -n $workers ]] || die_usage "--workers is required"
is_pos_int "$servers" || die_usage "--servers must be an integer >= 1, got '$servers'"
is_pos_int "$workers" || die_usage "--workers must be an integer >= 1, got '$workers'"
check_timeout
servers=$((10#$servers))
workers=$((10#$workers))
S=$servers
W=$workers
if [[ -n $port ]]; then
  if ! is_pos_int "$port" || ((10#$port > 65535)); then
    die_usage "--port must be an integer in 1..65535, got '$port'"
  fi
  port=$((10#$port))
fi
check_wopt_ranks
# --early-stop-metric val_auc is sparse-lr's: refused before anything starts for
# another --app (pskv-evaluator would refuse it too, after joining)
opt_value --early-stop-metric "${scheduler_opts[@]}"
es_metric=$REPLY
opt_value --app "${worker_args[@]}"
app_arg=$REPLY
if [[ $es_metric == val_auc && $app_arg != sparse-lr ]]; then
  msg "--early-stop-metric val_auc is sparse-lr's: --app ${app_arg:-?} reports val_loss and val_accuracy only"
  exit 2
fi

# ---------------------------------------------------------------- binaries
[[ -n $bin_dir ]] || bin_dir=${PSKV_BIN_DIR:-}
default_bin_dir "$0"
evaluator_bin=()
((evaluators)) && evaluator_bin=(pskv-evaluator)
for b in pskv-scheduler pskv-server pskv-worker "${evaluator_bin[@]}"; do
  if [[ ! -f $bin_dir/$b || ! -x $bin_dir/$b ]]; then
    die "binary $bin_dir/$b is missing or not executable (build pskv first, or use --bin-dir DIR / PSKV_BIN_DIR)"
  fi
done

# ---------------------------------------------------------------- keys
# key_opts NAME: the --keys option of daemon NAME (scheduler, server-I, worker-R), or none.
key_opts=()
set_key_opts() {
  key_opts=()
  [[ -n $keys ]] && key_opts=(--keys "$keys/$1")
  return 0
}
if [[ -n $keys ]]; then
  if [[ ! -e $keys ]]; then
    [[ -x $bin_dir/pskvctl ]] || die "binary $bin_dir/pskvctl is missing (needed to make a keyset)"
    make_keyset "$bin_dir/pskvctl" "$keys" "$servers" "$workers"
  fi
  check_keyset "$keys" "$servers" "$workers"
fi

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

# A random free port below the kernel's ephemeral range (outgoing connections and
# port-0 listeners take theirs from that range and could grab ours before the
# scheduler binds it).
pick_port() {
  local lo=32768 hi=60999 p
  read -r lo hi < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  local base=20000 span=$((lo - 20000))
  if ((span < 1000)); then base=$((hi + 1)) span=$((65000 - hi)); fi
  for _ in {1..200}; do
    p=$((base + (RANDOM * 32768 + RANDOM) % span))
    if port_is_free "$p"; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

auto_port=0
if [[ -z $port ]]; then
  port=$(pick_port) || die "could not find a free TCP port"
  auto_port=1
fi

# ---------------------------------------------------------------- log dir
setup_log_dir

# ---------------------------------------------------------------- process bookkeeping
# pids/alive/status (launch-lib.sh), names: index 0: scheduler, 1..S: servers,
# S+1..S+W: workers.
names=()
install_signal_traps

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
  track_pid "$pid"
}

# report_exit I ST TAIL: reap's report of an exited daemon (see launch-lib.sh).
report_exit() {
  msg "${names[$1]} (pid ${pids[$1]}) exited with status $2$3"
}

# proc_label I: how stop_procs names process I.
proc_label() { REPLY=${names[$1]}; }

# stop_all: SIGTERM everything still running, wait up to 5 s, then SIGKILL.
stop_all() {
  stop_procs 50 1 1 50 "${!pids[@]}"
}

# Waits (up to ~5 s) until the scheduler listens on its port, so servers and workers
# do not race it. Starts the others anyway after that. The scheduler says so in its
# log once bound ("pskv-scheduler listening on port P"): read with the shell's own
# read (no ss, no fork but the nap), so a short job (a pskv-tune trial) starts fast.
scheduler_says_listening() {
  local line
  while IFS= read -r line; do
    [[ $line == "pskv-scheduler listening on port $port" ]] && return 0
  done < "$log_dir/scheduler.log"
  return 1
}
wait_scheduler_listening() {
  local n
  for ((n = 0; n < 250; n++)); do
    [[ -n $got_signal ]] && return 0
    kill -0 "${pids[0]}" 2>/dev/null || return 0
    scheduler_says_listening && return 0
    nap 0.02
  done
  msg "warning: scheduler is not listening on port $port after 5 s; starting the others anyway"
}

# ---------------------------------------------------------------- launch
SECONDS=0
sched="127.0.0.1:$port"
set_key_opts scheduler
((evaluators)) && scheduler_opts=(--evaluators "$evaluators" "${scheduler_opts[@]}")
start_daemon scheduler "$bin_dir/pskv-scheduler" --port "$port" --servers "$servers" \
  --workers "$workers" "${key_opts[@]}" "${scheduler_opts[@]}"
wait_scheduler_listening
# a port picked here can still be taken by someone else first: try another
for _ in 1 2 3 4; do
  ((auto_port)) && [[ -z $got_signal ]] && ! kill -0 "${pids[0]}" 2>/dev/null &&
    grep -q 'Address already in use' "$log_dir/scheduler.log" 2>/dev/null || break
  wait "${pids[0]}" 2>/dev/null
  port=$(pick_port) || die "could not find a free TCP port"
  msg "port taken before the scheduler could bind it; trying port $port"
  sched="127.0.0.1:$port"
  # the scheduler keeps index 0 in the bookkeeping: forget the failed one
  pids=() alive=() status=() names=()
  start_daemon scheduler "$bin_dir/pskv-scheduler" --port "$port" --servers "$servers" \
    --workers "$workers" "${key_opts[@]}" "${scheduler_opts[@]}"
  wait_scheduler_listening
done

for ((i = 0; i < servers; i++)); do
  [[ -n $got_signal ]] && break
  set_key_opts "server-$i"
  start_daemon "server-$i" "$bin_dir/pskv-server" --scheduler "$sched" "${key_opts[@]}" "${server_opts[@]}"
done

for ((r = 0; r < workers; r++)); do
  [[ -n $got_signal ]] && break
  set_key_opts "worker-$r"
  cmd=("$bin_dir/pskv-worker" --scheduler "$sched" --rank "$r" "${key_opts[@]}" "${worker_args[@]}")
  add_rank_opts "$r"
  start_daemon "worker-$r" "${cmd[@]}"
  ((r == 0)) && start_tail $((servers + 1))
done
if ((evaluators)) && [[ -z $got_signal ]]; then
  set_key_opts evaluator-0
  start_daemon evaluator "$bin_dir/pskv-evaluator" --scheduler "$sched" "${key_opts[@]}" \
    "${worker_args[@]}" "${evaluator_opts[@]}"
fi

# ---------------------------------------------------------------- wait, stop, exit status
wait_for_workers
if ((evaluators)) && ((${#pids[@]} > S + W + 1)); then
  # the evaluator leaves with the job (STOP): its status, as the workers' are reported
  ev=$((S + W + 1))
  for ((n = 0; n < 50 && alive[ev]; n++)); do
    [[ -n $got_signal ]] && break
    reap quiet
    ((alive[ev])) && nap 0.1
  done
  if ((alive[ev])); then
    msg "evaluator (pid ${pids[ev]}) still running 5 s after the workers; stopping it"
  else
    msg "evaluator (pid ${pids[ev]}) exited with status ${status[ev]}"
  fi
fi
stop_all
stop_tail 10
compute_exit_status
trap - EXIT
exit "$rc"
