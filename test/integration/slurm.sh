# shellcheck shell=bash
# Slurm tests of test/integration.sh (sourced; uses its helpers): scripts/launch-slurm.sh
# under a real Slurm that the test starts and stops itself (scripts/slurm-local.sh:
# munged, slurmctld and slurmd on loopback, every file in the test's directory).

slurm_up() { # starts the private Slurm in $TDIR/slurm; 77 without root unless CI=true
  if [ "$(id -u)" -ne 0 ]; then
    echo "slurm test skipped: slurmctld and slurmd need root"
    [ "${CI:-}" = true ] && return 1
    return 77
  fi
  SL=$TDIR/slurm
  trap '"$top/scripts/slurm-local.sh" down "$SL" > /dev/null 2>&1' EXIT
  "$top/scripts/slurm-local.sh" up "$SL" > slurm-up.out 2>&1 || { cat slurm-up.out; return 1; }
  export SLURM_CONF=$SL/slurm.conf
}

job_daemons() { # job_daemons PORT: pids of the pskv daemons of the job on scheduler port PORT
  local p
  for p in $(pgrep -f -- "127.0.0.1:$1|--port $1"); do
    [[ $(cat "/proc/$p/comm" 2> /dev/null) == pskv-* ]] && echo "$p"
  done
}

tags slurm root
t_slurm() {
  # the exact-sum check as one Slurm job (1 scheduler, 1 server, 2 workers as the tasks
  # of one step); then a second job cancelled with scancel while it runs: every daemon
  # stops by itself (none killed after KillWait), none is left, nor the job
  slurm_up; local rc=$?
  [ $rc -eq 77 ] && return 77
  [ $rc -eq 0 ] || fail "cannot start a local Slurm (slurm-local.sh up)"
  local port jid pids p i left
  port=$(free_port)
  jid=$(sbatch --parsable --wait -n 4 -t 5 -o "$TDIR/job1.out" "$top/scripts/launch-slurm.sh" \
        --servers 1 --bin-dir "$BIN" --port "$port" -- --app check --rounds 300) ||
    { cat job1.out; fail "the check job failed (sbatch --wait exited $?)"; }
  [ "$(grep -c '^check ok: 2 workers, 1 servers' job1.out)" -eq 2 ] ||
    { tail -n 20 job1.out; fail "job $jid: not both workers' checks passed"; }
  grep -q "scheduler 127.0.0.1:$port, 1 servers, 2 workers on 1 node" job1.out ||
    fail "job $jid: the launcher's placement line is missing"

  port=$(free_port)
  jid=$(sbatch --parsable -n 4 -t 5 -o "$TDIR/job2.out" "$top/scripts/launch-slurm.sh" \
        --servers 1 --bin-dir "$BIN" --port "$port" -- --app check --rounds 1000000 --slowdown 2) ||
    fail "sbatch refused the second job"
  touch job2.out
  wait_line job2.out 'joined job' 2 60 || { cat job2.out; fail "job $jid: the workers did not join"; }
  pids=$(job_daemons "$port")
  [ "$(wc -w <<< "$pids")" -eq 4 ] || fail "job $jid: expected 4 daemons, found: $pids"
  scancel "$jid" || fail "scancel $jid failed"
  for i in $(seq 200); do # each daemon stops by itself within KillWait (30 s)
    left=0
    for p in $pids; do kill -0 "$p" 2> /dev/null && left=$p; done
    [ "$left" -eq 0 ] && break
    sleep 0.1
  done
  [ "$left" -eq 0 ] || fail "job $jid: pid $left still runs 20 s after scancel"
  for i in $(seq 100); do [ -z "$(squeue -h -j "$jid" 2> /dev/null)" ] && break; sleep 0.2; done
  [ -z "$(squeue -h -j "$jid" 2> /dev/null)" ] || fail "job $jid still in squeue after scancel"
  ! grep -q 'Killed' job2.out || { cat job2.out; fail "job $jid: a daemon was killed instead of stopping"; }
  grep -q 'scheduler 0 INFO terminated by signal 15' job2.out || fail "job $jid: no orderly scheduler stop"
  [ "$(grep -c '^check: stopped by signal 15' job2.out)" -eq 2 ] || fail "job $jid: the workers did not stop on SIGTERM"
  [ -z "$(job_daemons "$port")" ] || fail "job $jid: daemons left"
  echo "slurm: jobs ok, scancel stopped every daemon"
}
