# shellcheck shell=bash
# launch-lib.sh - the logic launch-local.sh and launch-hosts.sh share. Sourced, never run:
#   . "$(dirname "${BASH_SOURCE[0]}")/launch-lib.sh"
#
# Variables the sourcing script sets (and the functions read):
#   PROG            message prefix (launch-local / launch-hosts)
#   S, W            number of servers and of workers, once known
#   log_dir         the log directory (setup_log_dir fills it in when empty)
#   timeout_s       the --timeout value
# Variables this file sets up or maintains:
#   msg_fd          where msg writes: 2 at first, 3 (a copy of the real stderr) after
#                   setup_log_dir
#   scheduler_opts, server_opts, wopt_ranks, wopt_args, worker_args, bin_dir:
#                   filled in by parse_args (--scheduler-opt, --server-opt, --worker-opt,
#                   arguments after --, --bin-dir)
#   LAUNCH_RANK_RE  the regex a --worker-opt rank must match (default ^[0-9]+$)
#   pids, alive, status
#                   per daemon (index 0: scheduler, 1..S: servers, S+1..S+W: workers):
#                   the pid of the local child, 1 while it runs, its exit status once reaped
#   tail_pid        the tail streaming worker 0's log, empty when none
#   got_signal, signal_count
#                   the first signal caught (INT/TERM/HUP) and how many were caught
#   timed_out       1 when wait_for_workers gave up on --timeout
#   rc              the exit status (set by compute_exit_status)
# Callbacks the sourcing script defines:
#   usage                 prints the help text
#   set_opt NAME VAL      handles one of the script's own options (parse_args)
#   report_exit I ST TAIL reports that daemon I exited with status ST (reap; TAIL is
#                         empty or " while workers were running")
#   proc_label I          sets REPLY to how stop_procs names process I in its messages
#   elapsed_s             sets REPLY to the whole seconds since SECONDS=0 (default here:
#                         $SECONDS; a script may define a finer one after sourcing)

# reexec_with_default_int SCRIPT ARGS...: a script started in the background by a
# non-interactive shell inherits SIGINT ignored, and bash cannot trap a signal that was
# ignored on entry. Start SCRIPT afresh (same pid) with SIGINT at its default so that
# kill -INT / Ctrl-C still stop the cluster.
reexec_with_default_int() {
  if [[ -z ${PSKV_LAUNCH_REEXEC:-} && $(trap -p INT) == *"''"* ]] &&
    env --default-signal=INT true 2>/dev/null; then
    PSKV_LAUNCH_REEXEC=1 exec env --default-signal=INT "$BASH" "$@"
  fi
  unset PSKV_LAUNCH_REEXEC
}

# msg TEXT...: prints "PROG: TEXT" on msg_fd.
msg_fd=2
msg() { echo "$PROG: $*" >&"$msg_fd"; }

# die_usage TEXT...: reports TEXT, prints the usage on stderr and exits 2.
die_usage() {
  msg "$*"
  usage >&2
  exit 2
}

# die TEXT...: reports TEXT and exits 2.
die() {
  msg "$*"
  exit 2
}

# is_uint WORD / is_pos_int WORD: is WORD an unsigned integer / an integer in 1..999999999?
is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }
is_pos_int() { [[ $1 =~ ^[0-9]{1,9}$ ]] && ((10#$1 >= 1)); }

# in_list WORD ITEM...: is WORD one of the ITEMs?
in_list() {
  local w=$1 x
  shift
  for x in "$@"; do
    [[ $x == "$w" ]] && return 0
  done
  return 1
}

# opt_value NAME ARG...: the value the last NAME among the ARGs was given (NAME VAL
# or NAME=VAL), in REPLY; empty if none.
opt_value() {
  local name=$1
  shift
  REPLY=
  while (($#)); do
    case $1 in
      "$name"=*) REPLY=${1#*=} ;;
      "$name") REPLY=${2:-} ;;
    esac
    shift
  done
}

# parse_args VALUE_OPTS FLAG_OPTS ARGS...: parses the command line ARGS. VALUE_OPTS and
# FLAG_OPTS are space-separated lists of the script's own options that take a value
# (--opt VAL or --opt=VAL) and of those that take none. The shared options --timeout,
# --log-dir, --bin-dir, --scheduler-opt, --server-opt and --worker-opt are handled here;
# the script's own go to set_opt NAME VAL (VAL empty for a flag). Arguments after -- go
# to worker_args.
timeout_s=3600
log_dir=
bin_dir=
scheduler_opts=()
server_opts=()
wopt_ranks=()
wopt_args=()
worker_args=()
LAUNCH_RANK_RE='^[0-9]+$'
# shellcheck disable=SC2086  # the option lists are split on purpose
parse_args() {
  local value_opts="$1 --timeout --log-dir --bin-dir --scheduler-opt --server-opt --worker-opt"
  local flag_opts=$2 arg name val r
  shift 2
  while (($# > 0)); do
    arg=$1
    if [[ $arg == -- ]]; then
      shift
      # shellcheck disable=SC2034  # used by the sourcing script
      worker_args=("$@")
      break
    elif [[ $arg == --help || $arg == -h ]]; then
      usage
      exit 0
    elif in_list "$arg" $flag_opts; then
      shift
      set_opt "$arg" ""
      continue
    elif [[ $arg == *=* ]] && in_list "${arg%%=*}" $flag_opts; then
      die_usage "${arg%%=*} takes no value"
    elif in_list "$arg" $value_opts; then
      (($# >= 2)) || die_usage "option $arg needs a value"
      name=$arg
      val=$2
      shift 2
    elif [[ $arg == *=* ]] && in_list "${arg%%=*}" $value_opts; then
      name=${arg%%=*}
      val=${arg#*=}
      shift
    else
      die_usage "unknown option or argument: '$arg' (worker arguments go after --)"
    fi
    case $name in
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
        [[ $r =~ $LAUNCH_RANK_RE ]] || die_usage "--worker-opt: bad rank '$r' in '$val'"
        wopt_ranks+=("$((10#$r))")
        wopt_args+=("${val#*:}")
        ;;
      *) set_opt "$name" "$val" ;;
    esac
  done
}

# check_timeout: validates --timeout (usage error unless a positive integer).
check_timeout() {
  is_pos_int "$timeout_s" || die_usage "--timeout must be a positive integer, got '$timeout_s'"
  timeout_s=$((10#$timeout_s))
}

# check_wopt_ranks: every --worker-opt rank must be below W.
check_wopt_ranks() {
  local r
  for r in "${wopt_ranks[@]}"; do
    ((r < W)) || die_usage "--worker-opt: rank $r out of range (workers: $W)"
  done
}

# add_rank_opts R: appends worker R's own --worker-opt arguments to the array cmd (they
# come last, so they override the shared WORKER_ARGS).
add_rank_opts() {
  local j
  for j in "${!wopt_ranks[@]}"; do
    ((wopt_ranks[j] == $1)) && cmd+=("${wopt_args[j]}")
  done
  return 0
}

# default_bin_dir SCRIPT: sets bin_dir, when empty, to <SCRIPT's dir>/../build/bin; makes
# it absolute.
default_bin_dir() {
  local script_dir
  if [[ -z $bin_dir ]]; then
    script_dir=$(cd "$(dirname "$1")" && pwd) || die "cannot resolve the script's directory"
    bin_dir="$(dirname "$script_dir")/build/bin"
  fi
  [[ $bin_dir == /* ]] || bin_dir="$PWD/$bin_dir"
}

# keyset_names S W: sets REPLY to the daemon directories a keyset for S servers and W
# workers holds (`pskvctl keys init` layout), space separated: scheduler server-0 ...
# worker-0 ...
keyset_names() {
  local i out=scheduler
  for ((i = 0; i < $1; i++)); do out+=" server-$i"; done
  for ((i = 0; i < $2; i++)); do out+=" worker-$i"; done
  REPLY=$out
}

# check_keyset DIR S W: DIR must hold a NAME/node.key for every daemon of a job with S
# servers and W workers; else reports every missing directory and exits 2.
check_keyset() {
  local dir=$1 d missing=() more=''
  [[ -d $dir ]] || die "--keys $dir: no such directory (make a keyset with: pskvctl keys init $dir --servers $2 --workers $3)"
  keyset_names "$2" "$3"
  for d in $REPLY; do
    [[ -f $dir/$d/node.key ]] || missing+=("$d/")
  done
  ((${#missing[@]} == 0)) && return 0
  ((${#missing[@]} > 8)) && more=" and $((${#missing[@]} - 8)) more"
  die "--keys $dir lacks ${missing[*]:0:8}$more (each with a node.key), needed for $2 server(s) and $3 worker(s); make a set for this job with: pskvctl keys init NEWDIR --servers $2 --workers $3"
}

# make_keyset PSKVCTL DIR S W: a new keyset for S servers and W workers in DIR (pskvctl
# keys init; its errors go to msg_fd), or exit 2.
make_keyset() {
  "$1" keys init "$2" --servers "$3" --workers "$4" >/dev/null 2>&"$msg_fd" ||
    die "could not make a keyset in $2 with $1 keys init"
}

# setup_log_dir: creates log_dir (a new mktemp -d /tmp/pskv-XXXXXX when empty), says
# where it is, then sends this shell's own stderr to /dev/null (bash would otherwise print
# "line N: PID Killed ..." job notices at odd moments for processes that die of a signal;
# the script reports those itself, through msg on fd 3, the real stderr).
setup_log_dir() {
  if [[ -n $log_dir ]]; then
    mkdir -p -- "$log_dir" || die "cannot create log dir '$log_dir'"
  else
    log_dir=$(mktemp -d /tmp/pskv-XXXXXX) || die "mktemp -d failed"
  fi
  msg "logs in $log_dir"
  exec 3>&2 2>/dev/null
  msg_fd=3
}

# install_signal_traps: from now on INT, TERM and HUP only set got_signal/signal_count.
pids=()
alive=()
status=()
tail_pid=
got_signal=
signal_count=0
install_signal_traps() {
  trap 'on_signal INT' INT
  trap 'on_signal TERM' TERM
  trap 'on_signal HUP' HUP
}

# on_signal NAME: the trap action: counts the signal, remembers the first one.
# shellcheck disable=SC2317  # invoked from traps
on_signal() {
  signal_count=$((signal_count + 1))
  [[ -n $got_signal ]] || got_signal=$1
}

# nap SECONDS: sleep (keeping bash's job notices away from the real stderr, see above).
nap() { { sleep "$1"; } 2>/dev/null; }

# track_pid PID: records a new daemon's local child (next index of pids/alive/status).
track_pid() {
  pids+=("$1")
  alive+=(1)
  status+=("")
}

# reap [quiet]: notices exited children and collects their exit status. Workers are
# looked at first, so that a scheduler or server that shuts down right after the last
# worker is not reported as having died under running workers. Unless quiet, reports a
# failing worker, or a scheduler/server gone while workers run, through report_exit.
reap() {
  local quiet=${1:-} i st n=${#pids[@]}
  local order=()
  for ((i = S + 1; i < n; i++)); do order+=("$i"); done
  for ((i = 0; i <= S && i < n; i++)); do order+=("$i"); done
  for i in "${order[@]}"; do
    ((alive[i])) || continue
    if ! kill -0 "${pids[i]}" 2>/dev/null; then
      wait "${pids[i]}" 2>/dev/null
      st=$?
      alive[i]=0
      status[i]=$st
      [[ -z $quiet ]] || continue
      if ((i > S)); then
        ((st == 0)) || report_exit "$i" "$st" ""
      elif ((n > S + 1)) && any_alive $((S + 1)) $((S + W)); then
        report_exit "$i" "$st" " while workers were running"
      fi
    fi
  done
}

# any_alive FROM TO: is any child with index in FROM..TO still running?
any_alive() {
  local i
  for ((i = $1; i <= $2; i++)); do
    ((alive[i])) && return 0
  done
  return 1
}

# any_alive_of I...: is any of these children still running?
any_alive_of() {
  local i
  for i in "$@"; do
    ((alive[i])) && return 0
  done
  return 1
}

# stop_procs TERM_TENTHS HURRY NOTIFY_KILL KILL_TENTHS I...: stop/kill escalation for the
# local children I...: SIGTERM (+SIGCONT: a stopped process would not see SIGTERM), wait
# up to TERM_TENTHS tenths of a second (less when HURRY is 1 and another signal comes:
# impatient user), then SIGKILL what is left (saying so when NOTIFY_KILL is 1), wait up
# to KILL_TENTHS, and warn about any survivor. Names come from proc_label.
stop_procs() {
  local term_t=$1 hurry=$2 notify=$3 kill_t=$4 i n
  shift 4
  for i in "$@"; do
    if ((alive[i])); then
      kill -TERM "${pids[i]}" 2>/dev/null
      kill -CONT "${pids[i]}" 2>/dev/null
    fi
  done
  local start_count=$signal_count
  for ((n = 0; n < term_t; n++)); do
    reap quiet
    any_alive_of "$@" || break
    ((hurry && signal_count > start_count)) && break
    nap 0.1
  done
  any_alive_of "$@" || return 0
  for i in "$@"; do
    if ((alive[i])); then
      if ((notify)); then
        proc_label "$i"
        msg "$REPLY (pid ${pids[i]}) did not stop on SIGTERM, sending SIGKILL"
      fi
      kill -KILL "${pids[i]}" 2>/dev/null
    fi
  done
  for ((n = 0; n < kill_t; n++)); do
    reap quiet
    any_alive_of "$@" || break
    nap 0.1
  done
  for i in "$@"; do
    if ((alive[i])); then
      proc_label "$i"
      msg "warning: $REPLY (pid ${pids[i]}) is still there after SIGKILL"
    fi
  done
}

# start_tail I: streams worker 0's log (daemon I) to stdout until daemon I exits.
start_tail() {
  tail -n +1 -s 0.2 -f --pid="${pids[$1]}" "$log_dir/worker-0.log" </dev/null 2>&3 3>&- &
  tail_pid=$!
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

# elapsed_s: sets REPLY to the whole seconds since SECONDS=0 (see the header).
elapsed_s() { REPLY=$SECONDS; }

# wait_for_workers: waits until every worker has exited (reporting failures), a signal
# comes, or timeout_s has passed (timed_out=1). When the workers are done, lets worker 0's
# output drain and gives the scheduler and servers up to 10 s for their orderly shutdown.
timed_out=0
wait_for_workers() {
  local n first_worker=$((S + 1)) last_worker=$((S + W))
  timed_out=0
  if [[ -z $got_signal ]]; then
    while :; do
      reap
      [[ -n $got_signal ]] && break
      any_alive "$first_worker" "$last_worker" || break
      elapsed_s
      if ((REPLY >= timeout_s)); then
        timed_out=1
        break
      fi
      nap 0.2
    done
  fi
  if [[ -z $got_signal ]] && ((!timed_out)); then
    stop_tail 30
    for ((n = 0; n < 100; n++)); do
      reap quiet
      any_alive 0 "$S" || break
      [[ -n $got_signal ]] && break
      nap 0.1
    done
  fi
  if ((timed_out)); then
    msg "timed out after $timeout_s s"
  fi
  return 0
}

# compute_exit_status: prints the workers' exit statuses ("-": never started) and sets
# rc: the lowest-rank failing worker's status, 0 when none failed; 124 on time-out;
# 130 / 143 / 129 after SIGINT / SIGTERM / SIGHUP.
rc=0
compute_exit_status() {
  local r i st summary=
  rc=0
  for ((r = 0; r < W; r++)); do
    i=$((S + 1 + r))
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
}
