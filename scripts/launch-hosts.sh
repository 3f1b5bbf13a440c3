#!/usr/bin/env bash
# launch-hosts.sh - run a pskv cluster (scheduler, servers, workers) spread over several
# hosts, each daemon started over ssh. The multi-host sibling of launch-local.sh.
#
# Usage:
#   scripts/launch-hosts.sh --hostfile FILE [--keys DIR | --insecure] [--timeout SEC]
#       [--log-dir DIR] [--ssh-opt ARG]... [--bin-dir DIR] [--scheduler-opt ARG]...
#       [--server-opt ARG]... [--worker-opt RANK:ARG]... [--dry-run] [-- WORKER_ARGS...]
#
# Host file: one host per line,
#   DEST [scheduler] [servers=N] [workers=N] [advertise=ADDR] [port=P]
#   DEST       ssh destination (host or user@host)
#   scheduler  this host runs the scheduler (exactly one line has it)
#   servers=N  servers on this host (default 0)      workers=N  workers (default 0)
#   advertise  the address the other hosts dial (default: what DEST's host name resolves
#              to here with `getent hosts`, else the HostName `ssh -G DEST` reports, or
#              DEST itself when it is an IP address)
#   port=P     first port used on this host: the scheduler (on its line) takes P and the
#              servers the next ones; elsewhere the servers take P, P+1, ... Without it
#              the scheduler uses 7700 and the servers any free port (--port 0).
#   '#' starts a comment, blank lines are ignored. Mistakes are reported as
#   "launch-hosts: FILE:LINE: reason" (exit 2). The servers= and workers= totals S and W
#   must both be >= 1. Workers get ranks in host-file order.
#
# Keys (CURVE on every socket, only the job's keys admitted): by default a new keyset for
# the job is made here, `BIN/pskvctl keys init` (this host's BIN/pskvctl, else pskvctl on
# PATH) into a private mktemp -d /tmp/pskv-keys-local-XXXXXX; --keys DIR uses a keyset
# made before (`pskvctl keys init DIR --servers S --workers W`; missing daemon
# directories: exit 2). Before any daemon starts, each host gets, over the same ssh (a
# tar on ssh's stdin), only the directories of the daemons it runs (scheduler/,
# server-I/, worker-R/; never control/) in /tmp/pskv-keys-RUNID/NAME (0700, node.key
# 0600); a copy that fails or takes over 30 s stops the launch (nothing started, exit 1).
# Secret keys travel only as files: never on a command line, never in a log. The keyset
# is linked as LOGDIR/keys while the job runs, so that
#   pskvctl --scheduler SCHED --keys LOGDIR/keys/control status
# works. At the end, however it comes (all done, a failure, Ctrl-C, the time-out), the
# keys are removed from every host, then here the link and the private directory (never
# a --keys DIR). Only a SIGKILL of this script leaves them (remove the directories by
# hand). --insecure: no keys; every daemon gets --insecure (and so listens on every
# interface by default); the daemons warn.
#
# Commands (BIN = --bin-dir, SCHED = the scheduler line's advertise address and port,
# KEYS = --keys /tmp/pskv-keys-RUNID/NAME, or --insecure):
#   scheduler:  BIN/pskv-scheduler --port P --servers S --workers W --advertise ADDR KEYS [scheduler-opts...]
#   server:     BIN/pskv-server --scheduler SCHED --port P --advertise ADDR KEYS [server-opts...]
#   worker R:   BIN/pskv-worker --scheduler SCHED --rank R --advertise ADDR KEYS WORKER_ARGS... [R's worker-opts...]
# each run as `${PSKV_SSH:-ssh} -o BatchMode=yes [ssh-opts...] DEST -- sh -c '...'`, where
# the remote sh writes its pid to /tmp/pskv-remote-RUNID-NAME.pid and execs the daemon
# (arguments quoted for any POSIX shell). BatchMode=yes is left out when an --ssh-opt
# sets BatchMode itself.
#
# Options (each also accepted as --flag=value):
#   --hostfile FILE      the host file (required)
#   --keys DIR           the keyset to use (default: a new one for the job, see Keys)
#   --insecure           no keys at all (excludes --keys: usage error, exit 2)
#   --timeout SEC        stop everything after SEC seconds, exit 124 (default 3600)
#   --log-dir DIR        where logs and pid files go (default: new mktemp -d /tmp/pskv-XXXXXX)
#   --ssh-opt ARG        append ARG to every ssh command line (repeatable), e.g.
#                        --ssh-opt -F --ssh-opt /tmp/pskv-netns/ssh_config
#   --bin-dir DIR        where the binaries are on the hosts (default: this checkout's
#                        build/bin, as an absolute path; a relative DIR is taken from here)
#   --scheduler-opt ARG  append ARG to the scheduler's command line (repeatable)
#   --server-opt ARG     append ARG to every server's command line (repeatable)
#   --worker-opt R:ARG   append ARG to worker R's command line only (repeatable)
#   --dry-run            check everything, print the commands (the keyset, the key copies,
#                        the daemons, the clean-up; one per line, '#' lines between), start
#                        nothing (no secret is printed)
#   --help               print this help and exit 0
#
# Log dir contents (on the launching host): NAME.log (stdout+stderr of the ssh client,
# i.e. of the remote daemon), NAME.pid (pid of the local ssh client), NAME.remote
# ("DEST PIDFILE": where the remote pid is), for NAME = scheduler, server-I, worker-R;
# hosts.log: output of the key copies and the clean-up on the hosts; keys: the link to
# the keyset (see Keys). Worker 0's output is also streamed to this script's stdout.
#
# The scheduler starts first; servers and workers follow once its port answers from here
# (at most ~10 s). Runs until every worker has exited (a daemon that dies does not stop
# the others), then gives the scheduler and servers up to 10 s to shut down by themselves,
# then stops whatever is left: SIGTERM to the remote daemon over ssh (SIGKILL after 5 s),
# then the local ssh clients; last, the remote pid files and keys are removed. Ctrl-C / SIGTERM /
# the time-out stop everything the same way. (Killing a local ssh client alone would not
# stop the remote daemon, hence the remote kill.)
#
# Exit status: 0 when every worker exited 0; else the status of the lowest-rank failing
# worker (its ssh client's status: the remote status, 255 when ssh itself failed);
# 124 on time-out; 130 on SIGINT (143 on SIGTERM, 129 on SIGHUP); 2 on bad usage, a
# bad host file or keyset; 1 when the keys could not be copied to a host.
#
# Example:
#   printf '%s\n' 'h1 scheduler servers=1 workers=1' 'h2 servers=1 workers=2' >hosts
#   scripts/launch-hosts.sh --hostfile hosts --ssh-opt -F --ssh-opt /tmp/pskv-netns/ssh_config \
#       -- --app check

set -u
set -o pipefail

PROG=launch-hosts

# shellcheck source=launch-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/launch-lib.sh" || {
  echo "$PROG: cannot read $(dirname "${BASH_SOURCE[0]}")/launch-lib.sh" >&2
  exit 2
}
reexec_with_default_int "${BASH_SOURCE[0]}" "$@"

usage() {
  cat <<'EOF'
Usage: launch-hosts.sh --hostfile FILE [--keys DIR | --insecure] [--timeout SEC]
         [--log-dir DIR] [--ssh-opt ARG]... [--bin-dir DIR] [--scheduler-opt ARG]...
         [--server-opt ARG]... [--worker-opt RANK:ARG]... [--dry-run] [-- WORKER_ARGS...]

Runs a pskv cluster over several hosts: every daemon is started with ssh, as the host
file says; waits for the workers, then stops everything on every host.

Keys: by default a new keyset is made here for the job (pskvctl keys init) and each host
gets, over the same ssh, only its daemons' keys, in /tmp/pskv-keys-RUNID (0700); they
are removed from every host, and here, when the launch ends, however it ends. While it
runs: pskvctl --scheduler SCHED --keys LOGDIR/keys/control status.

Host file, one host per line ('#' starts a comment):
  DEST [scheduler] [servers=N] [workers=N] [advertise=ADDR] [port=P]
  DEST is an ssh destination (host or user@host); exactly one line has 'scheduler';
  advertise: address the other hosts dial (default: DEST's host name resolved here);
  port: first port used on that host (scheduler, then servers; default: scheduler 7700,
  servers any free port). Workers get ranks in host-file order.

  --hostfile FILE      the host file (required)
  --keys DIR           use this keyset (pskvctl keys init layout) instead of a new one
  --insecure           no keys: every daemon runs with --insecure (no authentication,
                       no encryption)
  --timeout SEC        stop everything after SEC seconds and exit 124 (default 3600)
  --log-dir DIR        directory for <daemon>.log/.pid/.remote (default: mktemp -d)
  --ssh-opt ARG        append ARG to every ssh command (repeatable),
                       e.g. --ssh-opt -F --ssh-opt /tmp/pskv-netns/ssh_config
  --bin-dir DIR        directory holding the binaries on the hosts
                       (default: <script dir>/../build/bin, as an absolute path)
  --scheduler-opt ARG  append ARG to the scheduler's arguments (repeatable)
  --server-opt ARG     append ARG to every server's arguments (repeatable)
  --worker-opt R:ARG   append ARG to worker R's arguments only (repeatable)
  --dry-run            print the commands it would run (keys, daemons, clean-up), one
                       per line; start nothing
  --help               show this help
Every option also accepts the --flag=value form. Arguments after -- go to every worker.
The ssh program is $PSKV_SSH if set, else ssh (run with -o BatchMode=yes).

Exit status: 0 if all workers exited 0, else the lowest-rank failing worker's status
(255: ssh itself failed); 124 on time-out; 130 on Ctrl-C; 2 on usage, host-file or
keyset errors; 1 when the keys could not be copied to a host.
EOF
}

# shq WORD: sets REPLY to WORD quoted for any POSIX shell (as is when nothing needs quoting).
shq() {
  if [[ $1 =~ ^[A-Za-z0-9_@%+=:,./-]+$ ]]; then
    REPLY=$1
  else
    REPLY="'${1//\'/\'\\\'\'}'"
  fi
}

# shq_join WORD...: sets REPLY to the words, each quoted by shq, separated by spaces.
shq_join() {
  local out='' w
  for w in "$@"; do
    shq "$w"
    out+="${out:+ }$REPLY"
  done
  REPLY=$out
}

have_timeout=0
command -v timeout >/dev/null 2>&1 && have_timeout=1

# bounded SEC CMD...: runs CMD, killed after SEC seconds when timeout(1) is there.
bounded() {
  local sec=$1
  shift
  if ((have_timeout)); then
    timeout "$sec" "$@"
  else
    "$@"
  fi
}

# ---------------------------------------------------------------- argument parsing
hostfile=
dry_run=0
ssh_opts=()
keys_dir=
insecure=0
LAUNCH_RANK_RE='^[0-9]{1,9}$'

# set_opt NAME VAL: this script's own options (see parse_args in launch-lib.sh).
set_opt() {
  case $1 in
    --dry-run) dry_run=1 ;;
    --hostfile)
      [[ -n $2 ]] || die_usage "--hostfile needs a non-empty value"
      hostfile=$2
      ;;
    --ssh-opt) ssh_opts+=("$2") ;;
    --keys)
      [[ -n $2 ]] || die_usage "--keys needs a directory"
      keys_dir=$2
      ;;
    --insecure) insecure=1 ;;
  esac
}

parse_args "--hostfile --ssh-opt --keys" "--dry-run --insecure" "$@"

[[ -n $hostfile ]] || die_usage "--hostfile is required"
if [[ -n $keys_dir ]] && ((insecure)); then
  die_usage "--keys and --insecure exclude each other (--keys DIR: CURVE with that keyset; --insecure: no keys at all)"
fi
check_timeout

SSH=${PSKV_SSH:-ssh}
[[ -n $SSH ]] || SSH=ssh

# ---------------------------------------------------------------- host file
# shellcheck source=launch-hostfile.sh
. "$(dirname "${BASH_SOURCE[0]}")/launch-hostfile.sh" || die "cannot read $(dirname "${BASH_SOURCE[0]}")/launch-hostfile.sh"
check_wopt_ranks

# ---------------------------------------------------------------- binaries (remote path)
default_bin_dir "${BASH_SOURCE[0]}"

# ---------------------------------------------------------------- keys
runid="$(date +%s)-$$-$RANDOM"
# shellcheck source=launch-keys.sh
. "$(dirname "${BASH_SOURCE[0]}")/launch-keys.sh" || die "cannot read $(dirname "${BASH_SOURCE[0]}")/launch-keys.sh"

# ---------------------------------------------------------------- commands
ssh_base=("$SSH")
batch_set=0
for o in "${ssh_opts[@]}"; do
  [[ ${o,,} == *batchmode* ]] && batch_set=1
done
((batch_set)) || ssh_base+=(-o BatchMode=yes)
ssh_base+=("${ssh_opts[@]}")

# Index 0: scheduler, 1..S: servers (host-file order), S+1..S+W: workers (by rank).
d_name=()
d_dest=()
d_pidfile=()
d_remote=()

# add_daemon NAME H ARGV...: the daemon NAME, on host line H, runs ARGV there.
add_daemon() {
  local name=$1 h=$2 pidfile script
  shift 2
  pidfile="/tmp/pskv-remote-$runid-$name.pid"
  shq "$pidfile"
  script="echo \$\$ > $REPLY && exec"
  shq_join "$@"
  script+=" $REPLY"
  shq "$script"
  d_name+=("$name")
  d_dest+=("${h_dest[h]}")
  d_pidfile+=("$pidfile")
  d_remote+=("sh -c $REPLY")
}

key_args scheduler scheduler
add_daemon scheduler "$sched_h" "$bin_dir/pskv-scheduler" --port "$sched_port" \
  --servers "$S" --workers "$W" --advertise "$sched_adv" "${kargs[@]}" "${scheduler_opts[@]}"
i=0
for h in "${!h_dest[@]}"; do
  for ((k = 0; k < h_servers[h]; k++)); do
    if [[ -n ${h_port[h]} ]]; then
      p=$((h_port[h] + h_sched[h] + k))
    else
      p=0
    fi
    key_args "server-$i" server
    add_daemon "server-$i" "$h" "$bin_dir/pskv-server" --scheduler "$sched_addr" --port "$p" \
      --advertise "${h_adv[h]}" "${kargs[@]}" "${server_opts[@]}"
    i=$((i + 1))
  done
done
r=0
for h in "${!h_dest[@]}"; do
  for ((k = 0; k < h_workers[h]; k++)); do
    # a rank's own options come last, so they override the shared WORKER_ARGS
    key_args "worker-$r" worker
    cmd=("$bin_dir/pskv-worker" --scheduler "$sched_addr" --rank "$r" --advertise "${h_adv[h]}"
      "${kargs[@]}" "${worker_args[@]}")
    add_rank_opts "$r"
    add_daemon "worker-$r" "$h" "${cmd[@]}"
    r=$((r + 1))
  done
done

# The hosts (ssh destinations) in host-file order, and the daemons each runs.
dests=()
declare -A dest_names=()
for i in "${!d_name[@]}"; do
  [[ -n ${dest_names[${d_dest[i]}]:-} ]] || dests+=("${d_dest[i]}")
  dest_names[${d_dest[i]}]+="${dest_names[${d_dest[i]}]:+ }${d_name[i]}"
done

# cleanup_script DEST KEYS I...: sets REPLY to the sh script that removes, on host DEST,
# the pid files of daemons I... and, when KEYS is 1, this run's keys (empty: nothing to do).
cleanup_script() {
  local dest=$1 keys=$2 i out=
  shift 2
  for i in "$@"; do
    [[ ${d_dest[i]} == "$dest" ]] || continue
    shq "${d_pidfile[i]}"
    [[ -n $out ]] || out="rm -f"
    out+=" $REPLY"
  done
  if ((keys)); then
    shq "$remote_keys"
    out+="${out:+; }rm -rf $REPLY"
  fi
  REPLY=$out
}

# cmd_line WORD...: sets REPLY to the words as one line of bash that can be pasted as is
# (a word holding a newline or another control character in bash's $'...' form).
cmd_line() {
  local w line=
  for w in "$@"; do
    if [[ $w == *[[:cntrl:]]* ]]; then
      printf -v REPLY '%q' "$w"
    else
      shq "$w"
    fi
    line+="${line:+ }$REPLY"
  done
  REPLY=$line
}

# ssh_line DEST SCRIPT: cmd_line of the ssh command that runs SCRIPT with sh on DEST.
ssh_line() {
  shq "$2"
  cmd_line "${ssh_base[@]}" "$1" -- "sh -c $REPLY"
}

if ((dry_run)); then
  # The commands, one per line, pasteable into bash; '#' lines say what each group does.
  if [[ $key_mode == new ]]; then
    echo "# a new keyset for this job, in a private directory here"
    cmd_line "$local_ctl"
    printf 'KEYSET=$(mktemp -d /tmp/pskv-keys-local-XXXXXX)/set && %s keys init "$KEYSET" --servers %d --workers %d\n' "$REPLY" "$S" "$W"
  elif [[ $key_mode == given ]]; then
    shq "$keyset"
    echo "KEYSET=$REPLY"
  fi
  if [[ $key_mode != off ]]; then
    echo "# each host gets its daemons' keys (a tar on ssh's stdin) in $remote_keys"
    for dest in "${dests[@]}"; do
      # shellcheck disable=SC2086  # names are single words
      copy_script ${dest_names[$dest]}
      ssh_line "$dest" "$REPLY"
      echo "tar -C \"\$KEYSET\" -chf - ${dest_names[$dest]} | $REPLY"
    done
  fi
  echo "# the daemons"
  for i in "${!d_name[@]}"; do
    cmd_line "${ssh_base[@]}" "${d_dest[i]}" -- "${d_remote[i]}"
    printf '%s\n' "$REPLY"
  done
  echo "# at the end, however it ends: on each host, remove the pid files$([[ $key_mode == off ]] || echo " and keys")"
  for dest in "${dests[@]}"; do
    cleanup_script "$dest" "$([[ $key_mode == off ]] && echo 0 || echo 1)" "${!d_name[@]}"
    ssh_line "$dest" "$REPLY"
    printf '%s\n' "$REPLY"
  done
  [[ $key_mode == new ]] && echo 'rm -rf "$(dirname "$KEYSET")"'
  exit 0
fi

# ---------------------------------------------------------------- checks before starting
command -v -- "$SSH" >/dev/null 2>&1 || die "ssh program '$SSH' not found (set PSKV_SSH or install ssh)"

# probe ADDR PORT: does something accept TCP connections there (from this host)?
probe() {
  if ((have_timeout)); then
    # shellcheck disable=SC2016  # expanded by the inner bash
    timeout 2 bash -c 'exec 5<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null 3>&-
  else
    (exec 5<>"/dev/tcp/$1/$2") 2>/dev/null
  fi
}

if probe "$sched_adv" "$sched_port"; then
  die "something already answers on $sched_addr (another scheduler?); choose another port with port= on the scheduler line ($hostfile:${h_line[sched_h]})"
fi

# ---------------------------------------------------------------- log dir
setup_log_dir

# ---------------------------------------------------------------- process bookkeeping
# pids/alive/status: the local ssh clients of the daemons, indexed like d_name.
# k_pids/k_alive/k_st/k_dest/k_what/k_log: auxiliary ssh processes (key copies, remote
# kills, clean-up): pid, 1 while it runs, exit status, host, what it does, its log.
k_pids=()
k_alive=()
k_st=()
k_dest=()
k_what=()
k_log=()
install_signal_traps

# start_daemon I: starts daemon I's ssh client in the background; logs to NAME.log, the
# client's pid to NAME.pid, "DEST PIDFILE" to NAME.remote. The client ignores SIGINT and
# SIGHUP (a Ctrl-C on the terminal would kill it and orphan the remote daemon): this
# script stops it once the remote daemon is gone.
start_daemon() {
  local i=$1 pid name=${d_name[$1]}
  local log="$log_dir/$name.log"
  : >"$log" || die "cannot write $log"
  printf '%s %s\n' "${d_dest[i]}" "${d_pidfile[i]}" >"$log_dir/$name.remote" ||
    die "cannot write $log_dir/$name.remote"
  (
    trap '' INT HUP
    exec "${ssh_base[@]}" "${d_dest[i]}" -- "${d_remote[i]}"
  ) </dev/null >>"$log" 2>&1 3>&- &
  pid=$!
  track_pid "$pid"
  echo "$pid" >"$log_dir/$name.pid" || die "cannot write $log_dir/$name.pid"
}

# spawn_aux DEST WHAT REMOTE_SCRIPT LOG [INPUT]: runs REMOTE_SCRIPT with sh on host DEST,
# in the background, stdin from INPUT (default /dev/null), output appended to LOG.
spawn_aux() {
  local dest=$1 what=$2 script=$3 log=$4 input=${5:-/dev/null}
  shq "$script"
  (
    trap '' INT HUP
    exec "${ssh_base[@]}" "$dest" -- "sh -c $REPLY"
  ) <"$input" >>"$log" 2>&1 3>&- &
  k_pids+=("$!")
  k_alive+=(1)
  k_st+=("")
  k_dest+=("$dest")
  k_what+=("$what")
  k_log+=("$log")
}

# spawn_killer I term|kill: signals daemon I through its remote pid file. term: SIGTERM,
# then SIGKILL when it is still there after 5 s; kill: SIGKILL at once.
spawn_killer() {
  local i=$1 f
  shq "${d_pidfile[$1]}"
  f=$REPLY
  local get="p=\$(cat $f 2>/dev/null) && [ -n \"\$p\" ] && kill -0 \"\$p\" 2>/dev/null || exit 0"
  if [[ $2 == term ]]; then
    spawn_aux "${d_dest[i]}" "stop ${d_name[i]}" "$get; kill -TERM \"\$p\" 2>/dev/null; kill -CONT \"\$p\" 2>/dev/null; n=0; while kill -0 \"\$p\" 2>/dev/null; do if [ \$n -ge 50 ]; then kill -KILL \"\$p\" 2>/dev/null; exit 0; fi; sleep 0.1 2>/dev/null || { sleep 1; n=\$((n + 9)); }; n=\$((n + 1)); done; exit 0" "$log_dir/${d_name[i]}.log"
  else
    spawn_aux "${d_dest[i]}" "kill ${d_name[i]}" "$get; kill -KILL \"\$p\" 2>/dev/null; exit 0" "$log_dir/${d_name[i]}.log"
  fi
}

# reap_aux: collects the auxiliary ssh processes that are done; reports ssh failures.
reap_aux() {
  local j st
  for j in "${!k_pids[@]}"; do
    ((k_alive[j])) || continue
    if ! kill -0 "${k_pids[j]}" 2>/dev/null; then
      wait "${k_pids[j]}" 2>/dev/null
      st=$?
      k_alive[j]=0
      k_st[j]=$st
      if ((st != 0)); then
        msg "warning: could not ${k_what[j]} on ${k_dest[j]}: ssh exited with status $st (see ${k_log[j]})"
      fi
    fi
  done
}

any_aux_alive() {
  local j
  for j in "${!k_pids[@]}"; do
    ((k_alive[j])) && return 0
  done
  return 1
}

# kill_aux: stops the auxiliary ssh processes still running (they are stuck connecting).
kill_aux() {
  local j n
  any_aux_alive || return 0
  for j in "${!k_pids[@]}"; do
    if ((k_alive[j])); then
      msg "warning: gave up trying to ${k_what[j]} on ${k_dest[j]} (ssh did not finish)"
      k_st[j]=-1
      kill -TERM "${k_pids[j]}" 2>/dev/null
    fi
  done
  for ((n = 0; n < 20; n++)); do
    any_aux_alive || break
    for j in "${!k_pids[@]}"; do
      if ((k_alive[j])) && ! kill -0 "${k_pids[j]}" 2>/dev/null; then
        wait "${k_pids[j]}" 2>/dev/null
        k_alive[j]=0
      fi
    done
    nap 0.1
  done
  for j in "${!k_pids[@]}"; do
    if ((k_alive[j])); then
      kill -KILL "${k_pids[j]}" 2>/dev/null
      wait "${k_pids[j]}" 2>/dev/null
      k_alive[j]=0
    fi
  done
}

# status_hint ST: what an ssh client's exit status ST probably means.
status_hint() {
  case $1 in
    255) REPLY=" (ssh failed: cannot connect or log in, or the remote daemon was killed by a signal)" ;;
    127) REPLY=" (command not found on the host: is --bin-dir right there?)" ;;
    126) REPLY=" (not executable on the host)" ;;
    *) REPLY= ;;
  esac
}

# report_exit I ST TAIL: reap's report of an exited ssh client (see launch-lib.sh).
report_exit() {
  status_hint "$2"
  msg "${d_name[$1]} on ${d_dest[$1]} exited with status $2$REPLY$3; log: $log_dir/${d_name[$1]}.log"
}

# proc_label I: how stop_procs names ssh client I.
proc_label() { REPLY="ssh client of ${d_name[$1]}"; }

# stop_all: stops every daemon that may still run on its host: SIGTERM over ssh (the
# remote side sends SIGKILL after 5 s), then the local ssh clients. A daemon may still
# run when its ssh client does, or when the client ended by a signal or with 255 (ssh
# lost the connection: the remote side does not know).
stop_all() {
  local i n targets=() left=()
  for i in "${!pids[@]}"; do
    if ((alive[i])) || { [[ -n ${status[i]} ]] && ((status[i] > 128)); }; then
      targets+=("$i")
    fi
  done
  ((${#targets[@]} > 0)) || return 0
  for i in "${targets[@]}"; do
    spawn_killer "$i" term
  done
  # Up to 15 s (5 s of grace on the host, plus ssh): until the remote kills are done and
  # the ssh clients have followed their daemons. A second signal: SIGKILL right away.
  local start_count=$signal_count hurried=0 idle=0
  for ((n = 0; n < 150; n++)); do
    reap quiet
    reap_aux
    any_alive_of "${targets[@]}" || { any_aux_alive || break; }
    if ! any_aux_alive; then
      idle=$((idle + 1))
      ((idle >= 20)) && break # kills done 2 s ago, clients still there: go on
    fi
    if ((!hurried && signal_count > start_count)); then
      hurried=1
      for i in "${targets[@]}"; do
        ((alive[i])) && spawn_killer "$i" kill
      done
    fi
    nap 0.1
  done
  # Clients still running: their daemon may have started after the first kill looked for
  # its pid file, or ignores SIGTERM. SIGKILL on the host, then wait a little more.
  kill_aux
  left=()
  for i in "${targets[@]}"; do
    ((alive[i])) && left+=("$i")
  done
  if ((${#left[@]} > 0)); then
    for i in "${left[@]}"; do
      msg "${d_name[i]} on ${d_dest[i]} still running, sending SIGKILL"
      spawn_killer "$i" kill
    done
    for ((n = 0; n < 100; n++)); do
      reap quiet
      reap_aux
      any_alive_of "${left[@]}" || { any_aux_alive || break; }
      ((n >= 30)) && ! any_aux_alive && break
      nap 0.1
    done
    kill_aux
  fi
  # Last, the local ssh clients themselves.
  left=()
  for i in "${targets[@]}"; do
    ((alive[i])) && left+=("$i")
  done
  ((${#left[@]} > 0)) || return 0
  for i in "${left[@]}"; do
    msg "warning: stopping the ssh client of ${d_name[i]} (pid ${pids[i]}); the daemon may still run on ${d_dest[i]} (pid file ${d_pidfile[i]})"
  done
  stop_procs 20 0 0 20 "${left[@]}"
}

remote_cleaned=0
# remove_remote: removes, on every host, the pid files of the daemons started there and
# this run's keys: one ssh per host, in parallel, up to 10 s.
remove_remote() {
  local dest n
  ((remote_cleaned)) && return 0
  remote_cleaned=1
  for dest in "${dests[@]}"; do
    cleanup_script "$dest" "${keys_sent_to[$dest]:-0}" "${!pids[@]}"
    [[ -n $REPLY ]] &&
      spawn_aux "$dest" "remove this run's pid files and $remote_keys" "$REPLY" "$log_dir/hosts.log"
  done
  for ((n = 0; n < 100; n++)); do
    reap_aux
    any_aux_alive || break
    nap 0.1
  done
  kill_aux
}

# Safety net: whatever happens, leave no process behind.
# shellcheck disable=SC2317  # invoked from the EXIT trap
emergency_cleanup() {
  local i n
  trap '' INT TERM HUP
  if ((${#pids[@]} > 0)); then
    for i in "${!pids[@]}"; do
      if ((alive[i])) || { [[ -n ${status[i]} ]] && ((status[i] > 128)); }; then
        spawn_killer "$i" kill
      fi
    done
    for ((n = 0; n < 100; n++)); do
      reap_aux
      any_aux_alive || break
      nap 0.1
    done
    kill_aux
    for i in "${!pids[@]}"; do
      ((alive[i])) && kill -KILL "${pids[i]}" 2>/dev/null
    done
  fi
  remove_remote
  remove_local_keys
  [[ -n $tail_pid ]] && kill -TERM "$tail_pid" 2>/dev/null
  return 0
}
trap emergency_cleanup EXIT

# Waits (up to ~10 s) until the scheduler's port answers from here, so servers and
# workers do not race it. Starts the others anyway after that.
wait_scheduler_listening() {
  local deadline=$((SECONDS + 10))
  while :; do
    [[ -n $got_signal ]] && return 0
    if ! kill -0 "${pids[0]}" 2>/dev/null; then
      reap quiet
      status_hint "${status[0]}"
      msg "scheduler on ${d_dest[0]} exited with status ${status[0]}$REPLY before its port answered; log: $log_dir/scheduler.log"
      return 0
    fi
    probe "$sched_adv" "$sched_port" && return 0
    ((SECONDS >= deadline)) && break
    nap 0.1
  done
  msg "warning: the scheduler does not answer on $sched_addr after 10 s; starting the others anyway"
}

# elapsed_s: whole seconds since the launch began (EPOCHREALTIME when there: SECONDS
# ticks on wall-clock second boundaries, up to 1 s early).
# (launch-lib.sh's elapsed_s, SECONDS, serves otherwise.)
if [[ -n ${EPOCHREALTIME:-} ]]; then
  elapsed_s() { REPLY=$(((${EPOCHREALTIME//[!0-9]/} - start_us) / 1000000)); }
fi

# ---------------------------------------------------------------- launch
SECONDS=0
start_us=${EPOCHREALTIME:-0}
start_us=${start_us//[!0-9]/}
if [[ $key_mode == off ]]; then
  msg "--insecure: no keys; whoever reaches these hosts can join the job and read its data"
elif ! send_keys; then
  if [[ -n $got_signal ]]; then
    msg "interrupted while copying the keys: nothing started"
  else
    msg "the keys did not reach every host: nothing started"
  fi
  compute_exit_status
  ((rc == 0)) && rc=1
  exit "$rc"
fi
msg "scheduler on ${d_dest[0]} at $sched_addr; $S server(s), $W worker(s) on ${#h_dest[@]} host line(s)"
start_daemon 0
wait_scheduler_listening

for ((i = 1; i <= S; i++)); do
  [[ -n $got_signal ]] && break
  start_daemon "$i"
done

for ((r = 0; r < W; r++)); do
  [[ -n $got_signal ]] && break
  start_daemon $((S + 1 + r))
  ((r == 0)) && start_tail $((S + 1))
done

# ---------------------------------------------------------------- wait, stop, exit status
wait_for_workers
stop_all
stop_tail 10
remove_remote
remove_local_keys
compute_exit_status
trap - EXIT
exit "$rc"
