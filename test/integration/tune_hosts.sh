# shellcheck shell=bash
# pskv-tune's trials on other hosts (sourced by integration.sh): run --launcher ssh
# into a namespaced host (hosts.sh's netns_up) and --launcher slurm under the private
# Slurm of slurm.sh (slurm_up); both need root.

# A study of 4 synth trials (6 epochs of 0.5 s), 2 at a time, on h1 of the
# namespaced hosts (host file `h1 workers=2`), the tuner's own service on the
# bridge's address (--advertise 10.213.0.1 --insecure). The tuner is killed (-9)
# once trial 2 has joined, and so are trial 2's ssh clients here (its worker on h1
# is left without them); the next `run` re-attaches trial 1 over its clients, kills
# trial 2's worker on h1 (which outlived its clients) before it runs again (attempt
# 2), and finishes: 4 complete; every worker registered from h1's address
# (10.213.0.11), none from this host; each group but trial 2's started once; no
# worker left on h1, no pid file.
tags tune_hosts_ssh root
t_tune_hosts_ssh() {
  netns_up 1; local rc=$?
  [ $rc -eq 77 ] && return 77
  [ $rc -eq 0 ] || fail "cannot create the namespaced hosts"
  trap '"$NETNS" down > /dev/null 2>&1' EXIT
  printf 'h1 workers=2   # the one host of the trials\n' > hosts
  printf -- '--lr log 1e-3 0.1\n--momentum uniform 0.5 0.95\n' > space.txt
  local sid run pg
  sid=$("$BIN/pskv-tune" create s.db --space space.txt --algo random --max-trials 4 --parallel 2 \
    --trial-epochs 6 -- --app synth --synth-epoch-time 0.5) || fail create
  sid=$(sed -n 's/^created s.db (study \([0-9a-f]*\)).*/\1/p' <<< "$sid")
  run=("$BIN/pskv-tune" run s.db --launcher ssh --hostfile hosts --ssh
    "ssh -F /tmp/pskv-netns/ssh_config" --advertise 10.213.0.1 --insecure)
  start tuner "${run[@]}"
  # killed as soon as trial 2 has joined: trial 1, started just before, then has
  # about 3 s left, for the next run to find it running
  wait_line s.db.d/trial-2/logs/worker-0.log 'joined job' 1 60 ||
    fail "trial 2 did not run: $(tail -3 tuner.log)"
  grep -q "trial 2: attempt 1, .*, ssh h1" tuner.log || fail "trial 2 not placed on h1: $(grep 'trial 2' tuner.log)"
  kill -9 "$(cat tuner.pid)"
  pg=$(cat s.db.d/trial-2/pid)
  kill -9 -- "-$pg" || fail "trial 2's clients (process group $pg) were not running"
  sleep 0.2 # the worker on h1 goes on without its client (it ignores SIGPIPE)
  ip netns pids pskv-h1 | xargs -r ps -o args= -p | grep -q -- "--group $sid-trial-2 " ||
    fail "trial 2's worker on h1 did not outlive its client: the test shows nothing"
  timeout 90 "${run[@]}" > run2.out 2>&1 || fail "second run: $(tail -5 run2.out)"
  # its worker on h1 was killed (none left) before trial 2 ran again
  local killed again
  killed=$(grep -n "group $sid-trial-2: killed its workers on h1 (none left)" run2.out | cut -d: -f1)
  again=$(grep -n 'trial 2: attempt 2,' run2.out | cut -d: -f1)
  [ -n "$killed" ] && [ -n "$again" ] && [ "$killed" -lt "$again" ] ||
    fail "trial 2 ran again before its worker on h1 was killed: $(grep -e 'trial 2' -e trial-2 run2.out)"
  grep -q "trial 1: re-attached to its group $sid-trial-1 .*ssh h1" run2.out ||
    fail "trial 1 not re-attached: $(grep 'trial 1' run2.out)"
  grep -q 'trial 2: its job is gone without an exit status: it runs again' run2.out ||
    fail "trial 2: $(grep 'trial 2' run2.out)"
  "$BIN/pskv-tune" status s.db | grep -q '^4 trials: 4 complete' || fail "$("$BIN/pskv-tune" status s.db)"
  "$BIN/pskv-tune" export s.db --csv | awk -F, '$1 == 2 && $7 != 2 { exit 1 }' ||
    fail "trial 2 not at its second attempt: $("$BIN/pskv-tune" export s.db --csv)"
  local slog=s.db.d/service/logs/scheduler.log
  sed -n 's/.*group \([0-9a-f]*-trial-[0-9]*\): started: .*/\1/p' "$slog" | sort > launches
  [ "$(sort -u launches | wc -l)" = 4 ] || fail "started: $(uniq -c launches)"
  ! uniq -d launches | grep -qv "^$sid-trial-2\$" || fail "started more than once: $(uniq -c launches)"
  [ "$(grep -c "group $sid-trial-[1-4]: worker registered: .* at 10.213.0.11:" "$slog")" = 5 ] ||
    fail "workers not from h1: $(grep 'worker registered' "$slog")"
  ! grep 'worker registered' "$slog" | grep -v ' at 10.213.0.11:' || fail "a worker ran on this host"
  no_pskv_in_hosts h1
  ! ls /tmp/pskv-tune-"$sid"-* 2> /dev/null || fail "pid files left on h1"
  echo "4 trials on h1 over ssh; a kill -9 of the tuner and of one trial's clients: each ran once at a time"
}

# --launcher slurm: 2 synth trials as Slurm jobs named for their groups (seen in
# squeue while they run), both complete; then a study whose trial hangs (an epoch
# of 30 s, --trial-timeout 2): it is killed through Slurm (scancel) and recorded
# failed, and no job of it is left in squeue.
tags tune_hosts_slurm root
t_tune_hosts_slurm() {
  slurm_up; local rc=$?
  [ $rc -eq 77 ] && return 77
  [ $rc -eq 0 ] || fail "cannot start a local Slurm (slurm-local.sh up)"
  printf -- '--lr log 1e-3 0.1\n--momentum uniform 0.5 0.95\n' > space.txt
  local sid pid
  sid=$("$BIN/pskv-tune" create s.db --space space.txt --algo random --max-trials 2 --parallel 2 \
    --trial-epochs 3 -- --app synth --synth-epoch-time 0.5) || fail create
  sid=$(sed -n 's/^created s.db (study \([0-9a-f]*\)).*/\1/p' <<< "$sid")
  start tuner "$BIN/pskv-tune" run s.db --launcher slurm --srun "srun --time=5"
  pid=$(cat tuner.pid)
  : > seen
  for _ in $(seq 600); do # 60 s
    kill -0 "$pid" 2> /dev/null || break
    squeue -h -o '%j %T' >> seen 2> /dev/null
    sleep 0.1
  done
  wait_exit "$pid" 1 || fail "run: $(tail -5 tuner.log)"
  "$BIN/pskv-tune" status s.db | grep -q '^2 trials: 2 complete' || fail "$("$BIN/pskv-tune" status s.db)"
  for t in 1 2; do
    grep -q "^$sid-trial-$t RUNNING" seen || fail "trial $t never a running Slurm job: $(sort -u seen)"
    grep -q "trial $t: attempt 1, .*, slurm" tuner.log || fail "trial $t: $(grep "trial $t" tuner.log)"
  done
  # a hung trial: killed through Slurm, failed, its job gone
  "$BIN/pskv-tune" create h.db --space space.txt --max-trials 1 --trial-epochs 1 \
    -- --app synth --synth-epoch-time 30 > /dev/null || fail "create h.db"
  timeout 60 "$BIN/pskv-tune" run h.db --launcher slurm --trial-timeout 2 > hung.out 2>&1 ||
    fail "run h.db: $(tail -5 hung.out)"
  "$BIN/pskv-tune" export h.db --csv | grep -q ',failed,.*hung' || fail "$("$BIN/pskv-tune" export h.db --csv)"
  [ -z "$(squeue -h 2> /dev/null)" ] || fail "jobs left: $(squeue)"
  echo "2 trials as Slurm jobs; a hung one ended by scancel"
}
