#!/usr/bin/env bash
# slurm-local.sh - a private one-node Slurm cluster on this machine, for trying
# scripts/launch-slurm.sh and for its test: munged (its own key and socket),
# slurmctld and slurmd, on loopback, with every file in DIR. Needs root (Debian's
# slurm-wlm and munge; no systemd needed).
#
#   scripts/slurm-local.sh up DIR     start it; prints the line `export SLURM_CONF=DIR/slurm.conf`
#   scripts/slurm-local.sh down DIR   stop what up DIR started (always exits 0)
#
# The node is this host (hostname -s) with 16 CPUs declared (SlurmdParameters=
# config_overrides: tasks may outnumber the cores, as pskv's tests need), one
# partition `pskv`, process tracking without cgroups (proctrack/linuxproc), and
# KillWait=30 (scancel: SIGTERM, then SIGKILL 30 s later, as Slurm's default).
# Exit status of up: 0 when sinfo shows the node idle within 20 s, 1 if not (the
# daemons' logs are in DIR/log), 2 usage, 77 not root.
set -u
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1 dir=$2
here=$(cd "$(dirname "$0")" && pwd)
stop_pid() { # stop_pid FILE: SIGTERM, up to 5 s, then SIGKILL
  local p i
  p=$(cat "$1" 2>/dev/null) || return 0
  kill "$p" 2>/dev/null || return 0
  for i in $(seq 50); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$p" 2>/dev/null
}
case $cmd in
  down)
    # jobs first (a test that failed may leave one running), while slurmd can still end them
    if [ -f "$dir/slurm.conf" ] && [ -f "$dir/slurmctld.pid" ]; then
      SLURM_CONF=$dir/slurm.conf timeout 10 scancel --quiet --user "$(id -un)" 2> /dev/null
      for _ in $(seq 50); do
        [ -z "$(SLURM_CONF=$dir/slurm.conf timeout 5 squeue -h 2> /dev/null)" ] && break
        sleep 0.2
      done
    fi
    stop_pid "$dir/slurmd.pid"; stop_pid "$dir/slurmctld.pid"; stop_pid "$dir/munge/munged.pid"
    exit 0 ;;
  up) ;;
  *) usage ;;
esac
if [ "$(id -u)" -ne 0 ]; then echo "slurm-local: needs root" >&2; exit 77; fi
for b in munged slurmctld slurmd sinfo; do
  command -v "$b" > /dev/null || { echo "slurm-local: $b not found (apt-get install slurm-wlm munge)" >&2; exit 1; }
done
. "$here/free-port.sh"
mkdir -p "$dir/state" "$dir/spool" "$dir/log" "$dir/munge" || exit 1
dir=$(cd "$dir" && pwd)
node=$(hostname -s)
ctld_port=$(free_port) slurmd_port=$(free_port)
head -c 128 /dev/urandom > "$dir/munge/munge.key" && chmod 600 "$dir/munge/munge.key"
cat > "$dir/slurm.conf" <<CONF
ClusterName=pskvlocal
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
KillWait=30
InactiveLimit=0
NodeName=$node NodeAddr=127.0.0.1 CPUs=16 RealMemory=4000 State=UNKNOWN
PartitionName=pskv Nodes=ALL Default=YES MaxTime=60 State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$dir/slurm.conf
munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
  --seed-file="$dir/munge/seed" 2> "$dir/log/munged.err" || { cat "$dir/log/munged.err" >&2; exit 1; }
slurmctld -c -f "$SLURM_CONF" || { echo "slurm-local: slurmctld did not start" >&2; exit 1; }
slurmd -c -N "$node" -f "$SLURM_CONF" || { echo "slurm-local: slurmd did not start" >&2; exit 1; }
for _ in $(seq 100); do
  if [ "$(sinfo -h -N -o %t 2>/dev/null)" = idle ]; then
    echo "export SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 0.2
done
echo "slurm-local: the node did not become idle within 20 s: $(sinfo -h -N -o '%t %E' 2>&1)" >&2
exit 1
