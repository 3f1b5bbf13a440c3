#!/usr/bin/env bash
# launch-slurm.sh - run a pskv job as one Slurm allocation: the scheduler, servers and
# workers are the tasks of one job step (srun --multi-prog).
#
# Usage (a batch job, or inside salloc):
#   sbatch --ntasks N [sbatch options] scripts/launch-slurm.sh --servers S
#       [--bin-dir DIR] [--keys DIR | --insecure] [--port P]
#       [--scheduler-opt ARG]... [--server-opt ARG]... [-- WORKER_ARGS...]
#
# Task 0 is the scheduler, tasks 1..S the servers, tasks S+1..N-1 the workers (rank =
# task - S - 1), so N = 1 + S + W with W >= 1. The scheduler runs on the allocation's
# first node (scontrol show hostnames $SLURM_JOB_NODELIST); its port is --port, else
# 20000 + SLURM_JOB_ID % 20000, so two jobs on one node do not collide.
#
# Options (each also accepted as --flag=value):
#   --servers S          number of servers (>= 1, required)
#   --bin-dir DIR        where the binaries are (default: $PSKV_BIN_DIR, else the
#                        directory of pskv-scheduler on PATH, else
#                        $SLURM_SUBMIT_DIR/build/bin). sbatch runs a copy of this script,
#                        so its own directory says nothing.
#   --keys DIR           CURVE with the keyset in DIR (`pskvctl keys init` layout), which
#                        every node must see at the same path
#   --insecure           across nodes without keys (no authentication, no encryption)
#   --port P             the scheduler's port
#   --scheduler-opt ARG  append ARG to the scheduler's command line (repeatable)
#   --server-opt ARG     append ARG to every server's command line (repeatable)
#   --help               print this help and exit 0
#
# Security: an allocation on one node runs on loopback (no keys needed). An allocation
# of several nodes needs --keys or --insecure; without either, a keyset for the job is
# made in $SLURM_SUBMIT_DIR/.pskv-keys-$SLURM_JOB_ID (mode 0700; the submit directory
# must be on a file system every node sees) and removed at the end.
#
# Stopping: scancel sends every task SIGTERM (SIGKILL KillWait seconds later): the
# scheduler and servers exit 0, the workers 143, as on a Ctrl-C; this script removes the
# keys it made. Exit status: srun's (0 when every task exited 0), 2 on usage errors.
set -u
usage() { sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
servers="" bin="${PSKV_BIN_DIR:-}" keys="" insecure=0 port="" sopts=() vopts=() wargs=()
while [ $# -gt 0 ]; do
  case $1 in
    --servers) servers=${2:-}; shift 2 ;;
    --servers=*) servers=${1#*=}; shift ;;
    --bin-dir) bin=${2:-}; shift 2 ;;
    --bin-dir=*) bin=${1#*=}; shift ;;
    --keys) keys=${2:-}; shift 2 ;;
    --keys=*) keys=${1#*=}; shift ;;
    --insecure) insecure=1; shift ;;
    --port) port=${2:-}; shift 2 ;;
    --port=*) port=${1#*=}; shift ;;
    --scheduler-opt) sopts+=("${2:-}"); shift 2 ;;
    --scheduler-opt=*) sopts+=("${1#*=}"); shift ;;
    --server-opt) vopts+=("${2:-}"); shift 2 ;;
    --server-opt=*) vopts+=("${1#*=}"); shift ;;
    --help|-h) usage 0 ;;
    --) shift; wargs=("$@"); break ;;
    *) echo "launch-slurm: unknown argument '$1'" >&2; usage ;;
  esac
done
die() { echo "launch-slurm: $*" >&2; exit 2; }
[ -n "${SLURM_JOB_ID:-}" ] && [ -n "${SLURM_NTASKS:-}" ] ||
  die "not inside a Slurm allocation (SLURM_JOB_ID/SLURM_NTASKS unset): submit with sbatch --ntasks N"
[[ $servers =~ ^[1-9][0-9]*$ ]] || die "--servers S (>= 1) is required"
workers=$((SLURM_NTASKS - 1 - servers))
[ "$workers" -ge 1 ] || die "$SLURM_NTASKS tasks leave no worker for 1 scheduler and $servers servers (--ntasks = 1 + S + W)"
[ -z "$port" ] || [[ $port =~ ^[1-9][0-9]*$ && $port -lt 65536 ]] || die "--port: '$port' is not a port"
[ -n "$keys" ] && [ $insecure -eq 1 ] && die "--keys and --insecure exclude each other"
for a in "${sopts[@]}" "${vopts[@]}" "${wargs[@]}"; do
  [[ $a =~ [[:space:]] ]] && die "argument '$a' holds white space, which srun --multi-prog cannot pass"
done
if [ -z "$bin" ]; then
  if command -v pskv-scheduler > /dev/null; then bin=$(dirname "$(command -v pskv-scheduler)")
  else bin=${SLURM_SUBMIT_DIR:-.}/build/bin; fi
fi
for b in pskv-scheduler pskv-server pskv-worker pskvctl; do
  [ -x "$bin/$b" ] || die "$bin/$b not found (--bin-dir, or PSKV_BIN_DIR)"
done
port=${port:-$((20000 + SLURM_JOB_ID % 20000))}
mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
[ ${#nodes[@]} -ge 1 ] || die "no node in SLURM_JOB_NODELIST '$SLURM_JOB_NODELIST'"
made=""
cleanup() { [ -z "$made" ] || rm -rf "$made"; rm -f "${conf:-}"; }
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
sched=${nodes[0]}
if [ ${#nodes[@]} -eq 1 ]; then
  sched=127.0.0.1          # one node: everything on loopback
elif [ -z "$keys" ] && [ $insecure -eq 0 ]; then
  made=${SLURM_SUBMIT_DIR:-.}/.pskv-keys-$SLURM_JOB_ID
  (umask 077 && "$bin/pskvctl" keys init "$made" --servers "$servers" --workers "$workers" > /dev/null) ||
    die "cannot make a keyset in $made"
  keys=$made
fi
sk=() vk=() wk=() ins=()
if [ -n "$keys" ]; then
  sk=(--keys "$keys/scheduler") vk=(--keys "$keys/server-%o") wk=(--keys "$keys/worker-%o")
fi
[ $insecure -eq 1 ] && ins=(--insecure)
conf=$(mktemp "${TMPDIR:-/tmp}/pskv-slurm-$SLURM_JOB_ID-XXXXXX.conf")
{
  echo "0 $bin/pskv-scheduler --port $port --servers $servers --workers $workers ${sk[*]} ${ins[*]} ${sopts[*]}"
  echo "1-$servers $bin/pskv-server --scheduler $sched:$port ${vk[*]} ${ins[*]} ${vopts[*]}"
  echo "$((servers + 1))-$((SLURM_NTASKS - 1)) $bin/pskv-worker --scheduler $sched:$port --rank %o ${wk[*]} ${ins[*]} ${wargs[*]}"
} > "$conf"
echo "launch-slurm: job $SLURM_JOB_ID: scheduler $sched:$port, $servers servers, $workers workers on ${#nodes[@]} node(s)"
srun --kill-on-bad-exit=1 --multi-prog "$conf" &
wait $!
